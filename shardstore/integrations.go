package shardstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"parley"
	"parley/sqlstore"
	"parley/storeguard"
)

// Integrations (parley.IntegrationStore, docs/directory.md "Integrations"):
// bots, their tokens, webhooks, commands, response_url grants and the
// audit log live on their workspace's shard, as the workspace's other
// rows do, and each call runs there behind the shard's guard.
//
// A bot authenticates through the control database (sessions are there),
// so a bot of a workspace on another shard has two copies in the control
// database: its users row, copied when it is made (the control database
// holds every handle, so a bot's handle taken there is refused), and each
// of its tokens' sessions, copied when the token is made and again when
// it is revoked. The shard's rows are the truth; a copy is only ever
// brought up to date from them, after the shard's own call authorised and
// made the change. A revocation (RevokeBot, RevokeBotToken, DeleteWebhook,
// DeleteIntegration) not made in the control database fails the call, is
// retried in the background, and doing the call again finishes it.
//
// Ids without a workspace: a webhook id and a bot id find their workspace
// as channel ids do (workspaceBy: every shard asked once, the answer
// cached, as neither ever changes workspace; an id no shard has remembered
// for a few seconds); a response_url token is a secret, so it is
// looked for on every shard each time and never cached, as invite codes.

var _ parley.IntegrationStore = (*Router)(nil)

// kinds of ids the cache resolves for integrations.
const (
	kindWebhook = "webhook"
	kindBot     = "bot"
)

// integ is the shard's integration store behind its guard.
func (p *pool) integ() parley.IntegrationStore { return p.g.Integrations(p.s) }

// integOn routes a call about a workspace's integrations.
func (r *Router) integOn(ctx context.Context, ws string, write bool) (*pool, error) {
	if write {
		return r.routeWrite(ctx, ws)
	}
	p, _, err := r.route(ctx, ws)
	return p, err
}

// Copies in the control database.

// copyBot copies a bot's users row from p's shard to the control
// database. Only a bot's row is copied this way: a person's row is the
// control database's own.
func (r *Router) copyBot(ctx context.Context, p *pool, botID string) error {
	var row sqlstore.UserCopy
	err := p.g.Run(ctx, storeguard.Read, func(ctx context.Context) (err error) {
		row, err = p.s.ReadUserCopy(ctx, botID)
		return err
	})
	if err == nil && !row.IsBot {
		err = parley.Errorf(parley.EINVALID, "user %s is not a bot", botID)
	}
	if err == nil {
		err = r.def.g.Run(ctx, storeguard.Write, func(ctx context.Context) error {
			return r.def.s.PutUserCopy(ctx, row)
		})
	}
	r.countBotSync("bot", err)
	if err != nil {
		return fmt.Errorf("copy bot %s from shard %s to the control database: %w", botID, p.id, err)
	}
	return nil
}

// copySession copies a bot token's session from p's shard to the control
// database (made, or revoked).
func (r *Router) copySession(ctx context.Context, p *pool, tokenHash string) error {
	var row sqlstore.SessionCopy
	err := p.g.Run(ctx, storeguard.Read, func(ctx context.Context) (err error) {
		row, err = p.s.ReadSessionCopy(ctx, tokenHash)
		return err
	})
	if err == nil {
		err = r.def.g.Run(ctx, storeguard.Write, func(ctx context.Context) error {
			return r.def.s.PutSessionCopy(ctx, row)
		})
	}
	r.countBotSync("token", err)
	if err != nil {
		return fmt.Errorf("copy a bot token's session from shard %s to the control database: %w", p.id, err)
	}
	return nil
}

// revokeBotCopy deactivates a revoked bot's copy in the control database
// and revokes its sessions there. A bot without a copy there (one made
// before integrations were routed, never given a token) has nothing to
// revoke.
func (r *Router) revokeBotCopy(ctx context.Context, botID string) error {
	err := r.def.g.Run(ctx, storeguard.Write, func(ctx context.Context) error {
		_, err := r.def.s.SyncDeactivated(ctx, botID, true)
		return err
	})
	if parley.ErrorCode(err) == parley.ENOTFOUND {
		err = nil
	}
	r.countBotSync("revoke", err)
	if err != nil {
		return fmt.Errorf("revoke bot %s in the control database: %w", botID, err)
	}
	return nil
}

func (r *Router) countBotSync(op string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	r.m.botSyncs.WithLabelValues(op, result).Inc()
}

// syncLater retries fn (a copy to the control database that failed) with
// backoff, 1 s doubling for about ten minutes, until it succeeds.
func (r *Router) syncLater(key string, fn func(context.Context) error) {
	r.later("sync "+key, func(ctx context.Context) error {
		err := fn(ctx)
		if err != nil {
			r.log.Debug("control database copy not made yet", "key", key, "err", err)
		}
		return err
	}, func() { r.log.Error("control database copy given up", "key", key) })
}

// Bots and tokens.

// CreateBot makes the bot on its workspace's shard and copies its users
// row to the control database. A handle the control database already has
// is refused (409) before the bot is made; one taken there in the
// meantime revokes the new bot and is refused too.
func (r *Router) CreateBot(ctx context.Context, actor, workspaceID string, b parley.NewBot) (*parley.Bot, error) {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	if p == r.def {
		return p.integ().CreateBot(ctx, actor, workspaceID, b)
	}
	var taken bool
	if err := r.def.g.Run(ctx, storeguard.Read, func(ctx context.Context) (err error) {
		taken, err = r.def.s.HandleTaken(ctx, b.Handle)
		return err
	}); err != nil {
		return nil, err
	}
	if taken {
		return nil, parley.Errorf(parley.ECONFLICT, "handle %q is already taken", b.Handle)
	}
	bot, err := p.integ().CreateBot(ctx, actor, workspaceID, b)
	if err != nil {
		return nil, err
	}
	if err := r.copyBot(ctx, p, bot.User.ID); err != nil {
		// No bot half made: without its copy it could never
		// authenticate, and its handle may be someone else's.
		if rerr := p.integ().RevokeBot(ctx, actor, workspaceID, bot.User.ID); rerr != nil {
			r.log.Error("bot not revoked after its copy failed", "bot", bot.User.ID, "shard", p.id, "err", rerr)
		}
		return nil, err
	}
	return bot, nil
}

func (r *Router) ListBots(ctx context.Context, actor, workspaceID string) ([]parley.Bot, error) {
	p, err := r.integOn(ctx, workspaceID, false)
	if err != nil {
		return nil, err
	}
	return p.integ().ListBots(ctx, actor, workspaceID)
}

// RevokeBot revokes the bot on its shard (authorised there), then its copy
// and sessions in the control database.
func (r *Router) RevokeBot(ctx context.Context, actor, workspaceID, botID string) error {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return err
	}
	if err := p.integ().RevokeBot(ctx, actor, workspaceID, botID); err != nil {
		return err
	}
	return r.afterBotRevoked(ctx, p, botID)
}

// afterBotRevoked makes a revocation done on p's shard in the control
// database; a failure is the caller's (the token may still authenticate)
// and is retried in the background.
func (r *Router) afterBotRevoked(ctx context.Context, p *pool, botID string) error {
	if p == r.def {
		return nil
	}
	if err := r.revokeBotCopy(ctx, botID); err != nil {
		r.syncLater("revoke/"+botID, func(ctx context.Context) error { return r.revokeBotCopy(ctx, botID) })
		return err
	}
	return nil
}

// CreateBotToken makes the token on the bot's shard (authorised there),
// then copies the bot's row and the token's session to the control
// database, where requests authenticate. A copy that fails revokes the
// token: the caller never sees a token that cannot work.
func (r *Router) CreateBotToken(ctx context.Context, actor, workspaceID, botID string, t parley.NewBotToken) (*parley.BotToken, error) {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	tok, err := p.integ().CreateBotToken(ctx, actor, workspaceID, botID, t)
	if err != nil || p == r.def {
		return tok, err
	}
	err = r.copyBot(ctx, p, botID) // made before routing, or its copy's earlier failure
	if err == nil {
		err = r.copySession(ctx, p, t.TokenHash)
	}
	if err != nil {
		if rerr := p.integ().RevokeBotToken(ctx, actor, workspaceID, tok.ID); rerr != nil {
			r.log.Error("bot token not revoked after its copy failed", "token", tok.ID, "shard", p.id, "err", rerr)
		}
		return nil, err
	}
	return tok, nil
}

func (r *Router) ListBotTokens(ctx context.Context, actor, workspaceID, botID string) ([]parley.BotToken, error) {
	p, err := r.integOn(ctx, workspaceID, false)
	if err != nil {
		return nil, err
	}
	return p.integ().ListBotTokens(ctx, actor, workspaceID, botID)
}

// RevokeBotToken revokes the token on its shard (authorised there), then
// its session's copy in the control database.
func (r *Router) RevokeBotToken(ctx context.Context, actor, workspaceID, tokenID string) error {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return err
	}
	if err := p.integ().RevokeBotToken(ctx, actor, workspaceID, tokenID); err != nil || p == r.def {
		return err
	}
	sync := func(ctx context.Context) error {
		var hash string
		if err := p.g.Run(ctx, storeguard.Read, func(ctx context.Context) (err error) {
			hash, _, err = p.s.BotTokenHash(ctx, workspaceID, tokenID)
			return err
		}); err != nil {
			return err
		}
		return r.copySession(ctx, p, hash)
	}
	if err := sync(ctx); err != nil {
		r.syncLater("token/"+tokenID, sync)
		return err
	}
	return nil
}

// BotWorkspace finds a bot's workspace on every shard once (cached: a bot
// never changes workspace).
func (r *Router) BotWorkspace(ctx context.Context, botID string) (string, error) {
	ws, err := r.workspaceBy(ctx, kindBot, botID, func(ctx context.Context, p *pool) (string, error) {
		return p.s.BotWorkspace(ctx, botID)
	})
	if parley.ErrorCode(err) == parley.ENOTFOUND {
		return "", parley.Errorf(parley.ENOTFOUND, "not a bot")
	}
	return ws, err
}

// Webhooks.

// CreateWebhook makes the webhook and its bot on the channel's shard. The
// bot's row is copied to the control database too (it holds every
// handle); that copy failing does not fail the webhook, whose bot never
// authenticates: it is retried in the background and made again with the
// bot's first token.
func (r *Router) CreateWebhook(ctx context.Context, actor, channelID, name, secretHash string) (*parley.Webhook, error) {
	p, err := r.routeID(ctx, kindChannel, channelID, true)
	if err != nil {
		return nil, err
	}
	w, err := p.integ().CreateWebhook(ctx, actor, channelID, name, secretHash)
	if err != nil {
		return nil, err
	}
	r.ids.Set(kindWebhook+":"+w.ID, w.WorkspaceID)
	r.copyBotSoon(ctx, p, w.BotID)
	return w, nil
}

// copyBotSoon copies an integration's bot to the control database, and
// retries in the background if that fails.
func (r *Router) copyBotSoon(ctx context.Context, p *pool, botID string) {
	if p == r.def {
		return
	}
	if err := r.copyBot(ctx, p, botID); err != nil {
		r.log.Warn("integration's bot not copied to the control database; retrying", "bot", botID, "err", err)
		r.syncLater("bot/"+botID, func(ctx context.Context) error { return r.copyBot(ctx, p, botID) })
	}
}

func (r *Router) ListWebhooks(ctx context.Context, actor, workspaceID string) ([]parley.Webhook, error) {
	p, err := r.integOn(ctx, workspaceID, false)
	if err != nil {
		return nil, err
	}
	return p.integ().ListWebhooks(ctx, actor, workspaceID)
}

// DeleteWebhook revokes the webhook's bot on its shard (authorised there),
// then in the control database.
func (r *Router) DeleteWebhook(ctx context.Context, actor, workspaceID, webhookID string) error {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return err
	}
	if err := p.integ().DeleteWebhook(ctx, actor, workspaceID, webhookID); err != nil || p == r.def {
		return err
	}
	var bot string
	if err := p.g.Run(ctx, storeguard.Read, func(ctx context.Context) (err error) {
		bot, err = p.s.WebhookBot(ctx, workspaceID, webhookID)
		return err
	}); err != nil {
		return fmt.Errorf("webhook's bot: %w", err)
	}
	return r.afterBotRevoked(ctx, p, bot)
}

// WebhookByID finds the webhook's workspace (cached; every shard asked on
// a miss) and reads it from that shard.
func (r *Router) WebhookByID(ctx context.Context, webhookID string) (*parley.Webhook, error) {
	ws, err := r.workspaceBy(ctx, kindWebhook, webhookID, func(ctx context.Context, p *pool) (string, error) {
		w, err := p.s.WebhookByID(ctx, webhookID)
		if err != nil {
			return "", err
		}
		return w.WorkspaceID, nil
	})
	if err != nil {
		return nil, err
	}
	p, err := r.integOn(ctx, ws, false)
	if err != nil {
		return nil, err
	}
	return p.integ().WebhookByID(ctx, webhookID)
}

// Commands and outgoing webhooks.

// CreateIntegration makes the command or outgoing webhook and its bot on
// the workspace's shard; the bot's row is copied as CreateWebhook's.
func (r *Router) CreateIntegration(ctx context.Context, actor, workspaceID string, in parley.NewIntegration) (*parley.Integration, error) {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	it, err := p.integ().CreateIntegration(ctx, actor, workspaceID, in)
	if err != nil {
		return nil, err
	}
	r.copyBotSoon(ctx, p, it.BotID)
	return it, nil
}

func (r *Router) ListIntegrations(ctx context.Context, actor, workspaceID string) ([]parley.Integration, error) {
	p, err := r.integOn(ctx, workspaceID, false)
	if err != nil {
		return nil, err
	}
	return p.integ().ListIntegrations(ctx, actor, workspaceID)
}

// DeleteIntegration revokes the integration's bot on its shard (authorised
// there), then in the control database.
func (r *Router) DeleteIntegration(ctx context.Context, actor, workspaceID, id string) error {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return err
	}
	if err := p.integ().DeleteIntegration(ctx, actor, workspaceID, id); err != nil || p == r.def {
		return err
	}
	var bot string
	if err := p.g.Run(ctx, storeguard.Read, func(ctx context.Context) (err error) {
		bot, err = p.s.IntegrationBot(ctx, workspaceID, id)
		return err
	}); err != nil {
		return fmt.Errorf("integration's bot: %w", err)
	}
	return r.afterBotRevoked(ctx, p, bot)
}

func (r *Router) CommandByName(ctx context.Context, workspaceID, name string) (*parley.Integration, error) {
	p, err := r.integOn(ctx, workspaceID, false)
	if err != nil {
		return nil, err
	}
	return p.integ().CommandByName(ctx, workspaceID, name)
}

func (r *Router) Commands(ctx context.Context, workspaceID string) ([]parley.Integration, error) {
	p, err := r.integOn(ctx, workspaceID, false)
	if err != nil {
		return nil, err
	}
	return p.integ().Commands(ctx, workspaceID)
}

func (r *Router) OutgoingWebhooks(ctx context.Context, workspaceID string) ([]parley.Integration, error) {
	p, err := r.integOn(ctx, workspaceID, false)
	if err != nil {
		return nil, err
	}
	return p.integ().OutgoingWebhooks(ctx, workspaceID)
}

// response_url grants.

// GrantResponse records the grant on its workspace's shard.
func (r *Router) GrantResponse(ctx context.Context, tokenHash string, g parley.CommandResponse, expires time.Time, maxUses int) error {
	p, err := r.routeWrite(ctx, g.WorkspaceID)
	if err != nil {
		return err
	}
	return p.integ().GrantResponse(ctx, tokenHash, g, expires, maxUses)
}

// UseResponse finds the grant on every shard (a token is a secret: not
// cached) and spends a use on its workspace's shard.
func (r *Router) UseResponse(ctx context.Context, tokenHash string) (*parley.CommandResponse, error) {
	ws, err := r.scatterFind(ctx, "response_url", func(ctx context.Context, p *pool) (string, error) {
		var ws string
		err := p.g.Run(ctx, storeguard.Read, func(ctx context.Context) (err error) {
			ws, err = p.s.ResponseWorkspace(ctx, tokenHash)
			return err
		})
		return ws, err
	})
	if err != nil {
		return nil, err
	}
	p, err := r.routeWrite(ctx, ws)
	if err != nil {
		return nil, err
	}
	return p.integ().UseResponse(ctx, tokenHash)
}

// SendEphemeral publishes through the workspace's shard, in order with
// its other events.
func (r *Router) SendEphemeral(ctx context.Context, workspaceID, userID string, m parley.EphemeralMessage) error {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return err
	}
	return p.integ().SendEphemeral(ctx, workspaceID, userID, m)
}

// The audit log.

func (r *Router) Audit(ctx context.Context, workspaceID string, e parley.AuditEntry) error {
	p, err := r.routeWrite(ctx, workspaceID)
	if err != nil {
		return err
	}
	return p.integ().Audit(ctx, workspaceID, e)
}

// AuditBots finds each entry's bot's workspace (cached), groups the
// entries by shard and records each group there, the shards at once.
// Entries of users that are not bots are left out. When a shard fails,
// the others' entries are recorded and the error says which failed; the
// entries carry their ids (given here when empty), and a shard skips an
// id it has, so retrying the same entries writes each once.
func (r *Router) AuditBots(ctx context.Context, entries []parley.AuditEntry) (int, error) {
	if len(entries) == 0 {
		return 0, nil
	}
	groups := map[*pool][]parley.AuditEntry{}
	type found struct {
		ws  string
		err error
	}
	bots := map[string]found{} // a batch has many entries of few bots
	var errs []error
	for _, e := range entries {
		f, ok := bots[e.BotID]
		if !ok {
			f.ws, f.err = r.BotWorkspace(ctx, e.BotID)
			bots[e.BotID] = f
		}
		ws, err := f.ws, f.err
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			continue
		}
		if err == nil {
			var p *pool
			if p, err = r.routeWrite(ctx, ws); err == nil {
				if e.ID == "" {
					e.ID = parley.NewID(parley.PrefixAuditEntry)
				}
				groups[p] = append(groups[p], e)
				continue
			}
		}
		errs = append(errs, fmt.Errorf("audit entry of bot %s: %w", e.BotID, err))
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	n := 0
	for p, es := range groups {
		wg.Go(func() {
			k, err := p.integ().AuditBots(ctx, es)
			mu.Lock()
			defer mu.Unlock()
			n += k
			if err != nil {
				errs = append(errs, fmt.Errorf("audit entries on shard %s: %w", p.id, err))
			}
		})
	}
	wg.Wait()
	return n, errors.Join(errs...)
}

func (r *Router) BotAudit(ctx context.Context, actor, workspaceID, botID, cursor string, limit int) (*parley.AuditPage, error) {
	p, err := r.integOn(ctx, workspaceID, false)
	if err != nil {
		return nil, err
	}
	return p.integ().BotAudit(ctx, actor, workspaceID, botID, cursor, limit)
}
