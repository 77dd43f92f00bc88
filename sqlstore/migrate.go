package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
)

//go:embed migrations
var migrations embed.FS

// migrate applies the embedded migrations of the dialect.
func migrate(ctx context.Context, db *sql.DB, d Dialect) error {
	sub, err := fs.Sub(migrations, "migrations/"+string(d))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	gd := goose.DialectSQLite3
	if d == Postgres {
		gd = goose.DialectPostgres
	}
	p, err := goose.NewProvider(gd, db, sub)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate %s: %w", d, err)
	}
	return nil
}
