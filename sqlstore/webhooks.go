package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"parley"
)

// Incoming webhooks, slash commands, outgoing webhooks, response_url
// grants and ephemeral messages (parley.IntegrationStore).

// webhookHandle derives a free-looking handle for an integration's bot
// from its name and id: handles are unique on the server, and two
// workspaces may both have a "ci" webhook.
func webhookHandle(prefix, name, id string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if b.Len() >= 16 {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	base := b.String()
	if base == "" {
		base = prefix
	}
	return base + "-" + strings.ToLower(id[len(id)-8:])
}

// CreateWebhook makes an incoming webhook for a channel, with a bot of
// its own that it puts in the channel. The channel's managers (workspace
// admins and its creator) may; others get EFORBIDDEN.
func (s *Store) CreateWebhook(ctx context.Context, actor, channelID, name, secretHash string) (*parley.Webhook, error) {
	name = strings.TrimSpace(name)
	if err := parley.ValidateName("name", name); err != nil {
		return nil, err
	}
	if secretHash == "" {
		return nil, parley.Errorf(parley.EINVALID, "secret hash is required")
	}
	var out *parley.Webhook
	err := s.writeChannel(ctx, "create webhook", channelID, func(ctx context.Context, tx *Tx) error {
		a, err := loadChannel(ctx, tx, actor, channelID)
		if err != nil {
			return err
		}
		if a.ch.Kind.IsDM() {
			return parley.Errorf(parley.EINVALID, "webhooks post into channels, not DMs")
		}
		if err := a.requireActive(); err != nil {
			return err
		}
		if !a.canManage(actor) {
			return parley.Errorf(parley.EFORBIDDEN, "only the channel's creator and workspace admins add webhooks")
		}
		id := parley.NewID(parley.PrefixWebhook)
		bot, err := tx.createBotUser(ctx, a.ch.WorkspaceID, name, webhookHandle("webhook", name, id), "webhook", actor)
		if err != nil {
			return err
		}
		if _, err := tx.addMember(ctx, a.ch, bot.ID, actor); err != nil {
			return err
		}
		w := &parley.Webhook{ID: id, WorkspaceID: a.ch.WorkspaceID, ChannelID: channelID, BotID: bot.ID, Name: name,
			CreatedBy: actor, CreatedAt: tx.now, SecretHash: secretHash}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO incoming_webhooks (workspace_id, id, channel_id, bot_id, name, secret_hash, created_by, created_at)
			 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			w.WorkspaceID, w.ID, channelID, bot.ID, name, secretHash, actor, micros(tx.now)); err != nil {
			return fmt.Errorf("insert webhook: %w", err)
		}
		out = w
		return nil
	})
	return out, err
}

const webhookColumns = `w.id, w.workspace_id, w.channel_id, w.bot_id, w.name, w.secret_hash, w.created_by, w.created_at`

func scanWebhook(sc scanner) (*parley.Webhook, error) {
	var w parley.Webhook
	var created int64
	if err := sc.Scan(&w.ID, &w.WorkspaceID, &w.ChannelID, &w.BotID, &w.Name, &w.SecretHash, &w.CreatedBy, &created); err != nil {
		return nil, err
	}
	w.CreatedAt = fromMicros(created)
	return &w, nil
}

// ListWebhooks lists the workspace's live incoming webhooks (admins only).
func (s *Store) ListWebhooks(ctx context.Context, actor, workspaceID string) ([]parley.Webhook, error) {
	if err := requireAdmin(ctx, s.rdb, workspaceID, actor); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+webhookColumns+` FROM incoming_webhooks w
		JOIN bots b ON b.user_id = w.bot_id WHERE w.workspace_id = $1 AND b.revoked_at IS NULL ORDER BY w.created_at, w.id`, workspaceID)
	if err != nil {
		return nil, fmt.Errorf("list webhooks: %w", err)
	}
	defer rows.Close()
	out := []parley.Webhook{}
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, fmt.Errorf("list webhooks: %w", err)
		}
		out = append(out, *w)
	}
	return out, rows.Err()
}

// DeleteWebhook revokes a webhook's bot, which ends the webhook (admins,
// or the channel's managers).
func (s *Store) DeleteWebhook(ctx context.Context, actor, workspaceID, webhookID string) error {
	return s.write(ctx, "delete webhook", func(ctx context.Context, tx *Tx) error {
		w, err := scanWebhook(tx.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM incoming_webhooks w
			WHERE w.workspace_id = $1 AND w.id = $2`, workspaceID, webhookID))
		if errors.Is(err, sql.ErrNoRows) {
			return parley.Errorf(parley.ENOTFOUND, "webhook not found")
		}
		if err != nil {
			return fmt.Errorf("load webhook: %w", err)
		}
		a, err := loadChannel(ctx, tx, actor, w.ChannelID)
		if err != nil {
			if parley.ErrorCode(err) == parley.ENOTFOUND {
				// A workspace admin may remove a webhook of a private
				// channel they are not in.
				if aerr := requireAdmin(ctx, tx, workspaceID, actor); aerr != nil {
					return err
				}
				return tx.revokeBot(ctx, workspaceID, w.BotID)
			}
			return err
		}
		if !a.canManage(actor) {
			return parley.Errorf(parley.EFORBIDDEN, "only the channel's creator and workspace admins remove webhooks")
		}
		return tx.revokeBot(ctx, workspaceID, w.BotID)
	})
}

// WebhookByID returns a live webhook for the server.
func (s *Store) WebhookByID(ctx context.Context, webhookID string) (*parley.Webhook, error) {
	w, err := scanWebhook(s.rdb.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM incoming_webhooks w
		JOIN bots b ON b.user_id = w.bot_id WHERE w.id = $1 AND b.revoked_at IS NULL`, webhookID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "webhook not found")
	}
	if err != nil {
		return nil, fmt.Errorf("webhook by id: %w", err)
	}
	return w, nil
}

// validateIntegration checks a command or outgoing webhook.
func validateIntegration(in *parley.NewIntegration) error {
	in.Name = strings.TrimPrefix(strings.TrimSpace(in.Name), "/")
	switch in.Kind {
	case parley.IntegrationCommand:
		if !validCommandName(in.Name) {
			return parley.Errorf(parley.EINVALID, "a command name is 1-32 of a-z, 0-9, - and _")
		}
		if isBuiltinCommand(in.Name) {
			return parley.Errorf(parley.ECONFLICT, "/%s is a built-in command", in.Name)
		}
		in.ChannelID, in.TriggerWords = "", nil
	case parley.IntegrationOutgoing:
		if err := parley.ValidateName("name", in.Name); err != nil {
			return err
		}
		if in.ChannelID == "" {
			return parley.Errorf(parley.EINVALID, "an outgoing webhook needs a channel_id")
		}
		var words []string
		for _, w := range in.TriggerWords {
			w = strings.TrimSpace(w)
			if w == "" {
				continue
			}
			if strings.ContainsAny(w, ",\n") || len(w) > 64 {
				return parley.Errorf(parley.EINVALID, "a trigger word has no comma or newline and at most 64 bytes")
			}
			words = append(words, w)
		}
		if len(words) == 0 || len(words) > 10 {
			return parley.Errorf(parley.EINVALID, "an outgoing webhook needs 1-10 trigger words")
		}
		in.TriggerWords = words
	default:
		return parley.Errorf(parley.EINVALID, "kind is %q or %q", parley.IntegrationCommand, parley.IntegrationOutgoing)
	}
	u, err := url.Parse(in.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(in.URL) > 2000 {
		return parley.Errorf(parley.EINVALID, "url must be an absolute http or https URL")
	}
	if err := parley.CheckText("description", in.Description); err != nil {
		return err
	}
	if len(in.Description) > 200 {
		return parley.Errorf(parley.EINVALID, "description is longer than 200 bytes")
	}
	if in.SigningSecret == "" {
		return parley.Errorf(parley.EINVALID, "signing secret is required")
	}
	return nil
}

func validCommandName(n string) bool {
	if n == "" || len(n) > 32 {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// BuiltinCommands are the slash commands the server answers itself.
var BuiltinCommands = []string{"me", "shrug", "topic", "invite", "leave", "remind"}

func isBuiltinCommand(n string) bool {
	for _, b := range BuiltinCommands {
		if b == n {
			return true
		}
	}
	return false
}

// CreateIntegration makes a slash command or an outgoing webhook, with its
// bot (workspace admins only). An outgoing webhook's bot joins its channel.
func (s *Store) CreateIntegration(ctx context.Context, actor, workspaceID string, in parley.NewIntegration) (*parley.Integration, error) {
	if err := validateIntegration(&in); err != nil {
		return nil, err
	}
	var out *parley.Integration
	key := workspaceID
	if in.ChannelID != "" {
		key = in.ChannelID
	}
	err := s.writeChannel(ctx, "create integration", key, func(ctx context.Context, tx *Tx) error {
		if err := requireAdmin(ctx, tx, workspaceID, actor); err != nil {
			return err
		}
		var ch *channelAccess
		if in.Kind == parley.IntegrationOutgoing {
			a, err := loadChannel(ctx, tx, actor, in.ChannelID)
			if err != nil {
				return err
			}
			if a.ch.WorkspaceID != workspaceID {
				return parley.Errorf(parley.ENOTFOUND, "channel not found")
			}
			if a.ch.Kind != parley.KindPublic && a.ch.Kind != parley.KindPrivate {
				return parley.Errorf(parley.EINVALID, "outgoing webhooks listen to channels, not DMs")
			}
			ch = a
		} else {
			var n int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM integrations i JOIN bots b ON b.user_id = i.bot_id
				WHERE i.workspace_id = $1 AND i.kind = 'command' AND i.name = $2 AND b.revoked_at IS NULL`,
				workspaceID, in.Name).Scan(&n); err != nil {
				return fmt.Errorf("check command: %w", err)
			}
			if n > 0 {
				return parley.Errorf(parley.ECONFLICT, "/%s already exists in this workspace", in.Name)
			}
			// A deleted command's row keeps its name: free it.
			if _, err := tx.ExecContext(ctx, `DELETE FROM integrations WHERE workspace_id = $1 AND kind = 'command' AND name = $2`,
				workspaceID, in.Name); err != nil {
				return fmt.Errorf("free command name: %w", err)
			}
		}
		id := parley.NewID(parley.PrefixIntegration)
		botName := in.Name
		if in.Kind == parley.IntegrationCommand {
			botName = "/" + in.Name
		}
		bot, err := tx.createBotUser(ctx, workspaceID, botName, webhookHandle(in.Kind, in.Name, id), in.Kind, actor)
		if err != nil {
			return err
		}
		if ch != nil {
			if _, err := tx.addMember(ctx, ch.ch, bot.ID, actor); err != nil {
				return err
			}
		}
		it := &parley.Integration{ID: id, WorkspaceID: workspaceID, Kind: in.Kind, Name: in.Name, ChannelID: in.ChannelID,
			TriggerWords: in.TriggerWords, URL: in.URL, Description: in.Description, SigningSecret: in.SigningSecret,
			BotID: bot.ID, CreatedBy: actor, CreatedAt: tx.now}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO integrations (workspace_id, id, kind, name, channel_id, trigger_words, url, description,
			   signing_secret, bot_id, created_by, created_at)
			 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			workspaceID, id, in.Kind, in.Name, in.ChannelID, strings.Join(in.TriggerWords, ","), in.URL, in.Description,
			in.SigningSecret, bot.ID, actor, micros(tx.now)); err != nil {
			if isUniqueViolation(err) {
				return parley.Errorf(parley.ECONFLICT, "/%s already exists in this workspace", in.Name)
			}
			return fmt.Errorf("insert integration: %w", err)
		}
		out = it
		return nil
	})
	return out, err
}

const integrationColumns = `i.id, i.workspace_id, i.kind, i.name, i.channel_id, i.trigger_words, i.url, i.description,
	i.signing_secret, i.bot_id, i.created_by, i.created_at`

// liveIntegrations is the FROM clause of integrations whose bot is live.
const liveIntegrations = ` FROM integrations i JOIN bots b ON b.user_id = i.bot_id AND b.revoked_at IS NULL`

func scanIntegration(sc scanner) (*parley.Integration, error) {
	var it parley.Integration
	var words string
	var created int64
	if err := sc.Scan(&it.ID, &it.WorkspaceID, &it.Kind, &it.Name, &it.ChannelID, &words, &it.URL, &it.Description,
		&it.SigningSecret, &it.BotID, &it.CreatedBy, &created); err != nil {
		return nil, err
	}
	if words != "" {
		it.TriggerWords = strings.Split(words, ",")
	}
	it.CreatedAt = fromMicros(created)
	return &it, nil
}

func (s *Store) queryIntegrations(ctx context.Context, where string, args ...any) ([]parley.Integration, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+integrationColumns+liveIntegrations+` WHERE `+where+` ORDER BY i.created_at, i.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list integrations: %w", err)
	}
	defer rows.Close()
	out := []parley.Integration{}
	for rows.Next() {
		it, err := scanIntegration(rows)
		if err != nil {
			return nil, fmt.Errorf("list integrations: %w", err)
		}
		out = append(out, *it)
	}
	return out, rows.Err()
}

// ListIntegrations lists the workspace's commands and outgoing webhooks
// (admins only: the answer holds their signing secrets).
func (s *Store) ListIntegrations(ctx context.Context, actor, workspaceID string) ([]parley.Integration, error) {
	if err := requireAdmin(ctx, s.rdb, workspaceID, actor); err != nil {
		return nil, err
	}
	return s.queryIntegrations(ctx, `i.workspace_id = $1`, workspaceID)
}

// DeleteIntegration revokes an integration's bot (admins only).
func (s *Store) DeleteIntegration(ctx context.Context, actor, workspaceID, id string) error {
	return s.write(ctx, "delete integration", func(ctx context.Context, tx *Tx) error {
		if err := requireAdmin(ctx, tx, workspaceID, actor); err != nil {
			return err
		}
		var botID string
		err := tx.QueryRowContext(ctx, `SELECT bot_id FROM integrations WHERE workspace_id = $1 AND id = $2`, workspaceID, id).Scan(&botID)
		if errors.Is(err, sql.ErrNoRows) {
			return parley.Errorf(parley.ENOTFOUND, "integration not found")
		}
		if err != nil {
			return fmt.Errorf("load integration: %w", err)
		}
		return tx.revokeBot(ctx, workspaceID, botID)
	})
}

// CommandByName returns a live slash command of the workspace.
func (s *Store) CommandByName(ctx context.Context, workspaceID, name string) (*parley.Integration, error) {
	it, err := scanIntegration(s.rdb.QueryRowContext(ctx, `SELECT `+integrationColumns+liveIntegrations+`
		WHERE i.workspace_id = $1 AND i.kind = 'command' AND i.name = $2`, workspaceID, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, parley.Errorf(parley.ENOTFOUND, "no command /%s in this workspace", name)
	}
	if err != nil {
		return nil, fmt.Errorf("command by name: %w", err)
	}
	return it, nil
}

// Commands returns the workspace's live slash commands.
func (s *Store) Commands(ctx context.Context, workspaceID string) ([]parley.Integration, error) {
	return s.queryIntegrations(ctx, `i.workspace_id = $1 AND i.kind = 'command'`, workspaceID)
}

// OutgoingWebhooks returns the workspace's live outgoing webhooks.
func (s *Store) OutgoingWebhooks(ctx context.Context, workspaceID string) ([]parley.Integration, error) {
	return s.queryIntegrations(ctx, `i.workspace_id = $1 AND i.kind = 'outgoing'`, workspaceID)
}

// GrantResponse records a response_url token.
func (s *Store) GrantResponse(ctx context.Context, tokenHash string, r parley.CommandResponse, expires time.Time, maxUses int) error {
	return s.write(ctx, "grant command response", func(ctx context.Context, tx *Tx) error {
		// Expired grants go as new ones come: the table stays small.
		if _, err := tx.ExecContext(ctx, `DELETE FROM command_responses WHERE expires_at < $1`, micros(tx.now)); err != nil {
			return fmt.Errorf("expire command responses: %w", err)
		}
		if _, err := tx.ExecContext(ctx,
			`INSERT INTO command_responses (token_hash, workspace_id, integration_id, channel_id, user_id, uses, expires_at, thread_root_id)
			 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			tokenHash, r.WorkspaceID, r.IntegrationID, r.ChannelID, r.UserID, -maxUses, micros(expires), nullString(r.ThreadRootID)); err != nil {
			return fmt.Errorf("insert command response: %w", err)
		}
		return nil
	})
}

// UseResponse spends one use of a response_url token. uses counts up from
// -maxUses to 0.
func (s *Store) UseResponse(ctx context.Context, tokenHash string) (*parley.CommandResponse, error) {
	var out *parley.CommandResponse
	err := s.write(ctx, "use command response", func(ctx context.Context, tx *Tx) error {
		var r parley.CommandResponse
		var root sql.NullString
		err := tx.QueryRowContext(ctx,
			`UPDATE command_responses SET uses = uses + 1 WHERE token_hash = $1 AND uses < 0 AND expires_at > $2
			 RETURNING workspace_id, integration_id, channel_id, user_id, thread_root_id`, tokenHash, micros(tx.now)).
			Scan(&r.WorkspaceID, &r.IntegrationID, &r.ChannelID, &r.UserID, &root)
		r.ThreadRootID = root.String
		if errors.Is(err, sql.ErrNoRows) {
			return parley.Errorf(parley.ENOTFOUND, "response_url is unknown, expired or used up")
		}
		if err != nil {
			return fmt.Errorf("use command response: %w", err)
		}
		err = tx.QueryRowContext(ctx, `SELECT i.bot_id`+liveIntegrations+` WHERE i.workspace_id = $1 AND i.id = $2`,
			r.WorkspaceID, r.IntegrationID).Scan(&r.BotID)
		if errors.Is(err, sql.ErrNoRows) {
			return parley.Errorf(parley.ENOTFOUND, "the command was removed")
		}
		if err != nil {
			return fmt.Errorf("command response bot: %w", err)
		}
		out = &r
		return nil
	})
	return out, err
}

// SendEphemeral publishes message.ephemeral to one user's sessions in a
// workspace. Nothing is stored; the write transaction is there to publish
// after it like every other event (in order with what came before).
func (s *Store) SendEphemeral(ctx context.Context, workspaceID, userID string, m parley.EphemeralMessage) error {
	return s.write(ctx, "send ephemeral", func(ctx context.Context, tx *Tx) error {
		if m.CreatedAt.IsZero() {
			m.CreatedAt = tx.now
		}
		return tx.emit(workspaceID, parley.EventMessageEphemeral, struct {
			WorkspaceID string                   `json:"workspace_id"`
			Message     *parley.EphemeralMessage `json:"message"`
		}{workspaceID, &m}, parley.TopicUser(userID))
	})
}
