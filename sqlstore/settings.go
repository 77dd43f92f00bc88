package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"parley"
)

// liveConfigKey is the settings row that holds the live configuration.
const liveConfigKey = "live"

// LoadLiveConfig reads the stored live configuration over the defaults, so
// fields a newer binary added keep their defaults until someone sets them.
func (s *Store) LoadLiveConfig(ctx context.Context) (parley.LiveConfig, error) {
	c := parley.DefaultLiveConfig()
	var value string
	err := s.rdb.QueryRowContext(ctx, `SELECT value FROM settings WHERE key = $1`, liveConfigKey).Scan(&value)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return c, nil
	case err != nil:
		return c, fmt.Errorf("load live config: %w", err)
	}
	if err := json.Unmarshal([]byte(value), &c); err != nil {
		return parley.DefaultLiveConfig(), fmt.Errorf("load live config: stored value: %w", err)
	}
	return c, nil
}

// SaveLiveConfig stores c as the live configuration.
func (s *Store) SaveLiveConfig(ctx context.Context, c parley.LiveConfig) error {
	value, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("save live config: %w", err)
	}
	return s.write(ctx, "save_live_config", func(ctx context.Context, tx *Tx) error {
		_, err := tx.ExecContext(ctx,
			`INSERT INTO settings (key, value, version, updated_at) VALUES ($1, $2, 1, $3)
			 ON CONFLICT (key) DO UPDATE SET value = excluded.value,
			   version = settings.version + 1, updated_at = excluded.updated_at`,
			liveConfigKey, string(value), micros(tx.now))
		if err != nil {
			return fmt.Errorf("save live config: %w", err)
		}
		return nil
	})
}
