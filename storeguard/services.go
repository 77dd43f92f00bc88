package storeguard

// The file service and the integration store go through the same
// bulkheads and breaker as parley.Store: they are the same database, and a
// stalled database must answer 503 on their routes too, not hang them.
// Their calls take the purposes of the store's (reads Read, changes Write).

import (
	"context"
	"time"

	"parley"
)

// Files returns fs (the file service's metadata store, on this guard's
// database) behind the guard.
func (g *Guard) Files(fs parley.FileService) parley.FileService { return &fileGuard{g: g, s: fs} }

// Integrations returns is behind the guard.
func (g *Guard) Integrations(is parley.IntegrationStore) parley.IntegrationStore {
	return &integGuard{g: g, s: is}
}

var (
	_ parley.FileService      = (*fileGuard)(nil)
	_ parley.IntegrationStore = (*integGuard)(nil)
)

// do runs an error-only call.
func do(g *Guard, ctx context.Context, p Purpose, fn func(context.Context) error) error {
	_, err := call(g, ctx, p, func(ctx context.Context) (struct{}, error) { return struct{}{}, fn(ctx) })
	return err
}

type fileGuard struct {
	g *Guard
	s parley.FileService
}

func (f *fileGuard) CheckUpload(ctx context.Context, actor, workspaceID string, size int64, q parley.FileQuota) error {
	return do(f.g, ctx, Read, func(ctx context.Context) error { return f.s.CheckUpload(ctx, actor, workspaceID, size, q) })
}

func (f *fileGuard) CreateFile(ctx context.Context, actor, workspaceID string, fl parley.File, q parley.FileQuota) (*parley.File, error) {
	return call(f.g, ctx, Write, func(ctx context.Context) (*parley.File, error) {
		return f.s.CreateFile(ctx, actor, workspaceID, fl, q)
	})
}

func (f *fileGuard) GetFile(ctx context.Context, actor, fileID string) (*parley.File, error) {
	return call(f.g, ctx, Read, func(ctx context.Context) (*parley.File, error) { return f.s.GetFile(ctx, actor, fileID) })
}

func (f *fileGuard) ListChannelFiles(ctx context.Context, actor, channelID, cursor string, limit int) (*parley.FilePage, error) {
	return call(f.g, ctx, History, func(ctx context.Context) (*parley.FilePage, error) {
		return f.s.ListChannelFiles(ctx, actor, channelID, cursor, limit)
	})
}

func (f *fileGuard) DeleteFile(ctx context.Context, actor, fileID string) error {
	return do(f.g, ctx, Write, func(ctx context.Context) error { return f.s.DeleteFile(ctx, actor, fileID) })
}

func (f *fileGuard) CreateUpload(ctx context.Context, actor, workspaceID string, u parley.NewUpload, q parley.FileQuota) (*parley.Upload, error) {
	return call(f.g, ctx, Write, func(ctx context.Context) (*parley.Upload, error) {
		return f.s.CreateUpload(ctx, actor, workspaceID, u, q)
	})
}

func (f *fileGuard) GetUpload(ctx context.Context, actor, uploadID string) (*parley.Upload, error) {
	return call(f.g, ctx, Read, func(ctx context.Context) (*parley.Upload, error) { return f.s.GetUpload(ctx, actor, uploadID) })
}

func (f *fileGuard) AdvanceUpload(ctx context.Context, actor, uploadID string, from, to int64) (*parley.Upload, error) {
	return call(f.g, ctx, Write, func(ctx context.Context) (*parley.Upload, error) {
		return f.s.AdvanceUpload(ctx, actor, uploadID, from, to)
	})
}

func (f *fileGuard) DeleteUpload(ctx context.Context, actor, uploadID string) error {
	return do(f.g, ctx, Write, func(ctx context.Context) error { return f.s.DeleteUpload(ctx, actor, uploadID) })
}

func (f *fileGuard) SweepFiles(ctx context.Context, limit int) ([]parley.File, error) {
	return call(f.g, ctx, Read, func(ctx context.Context) ([]parley.File, error) { return f.s.SweepFiles(ctx, limit) })
}

func (f *fileGuard) PurgeFiles(ctx context.Context, fileIDs []string) error {
	return do(f.g, ctx, Write, func(ctx context.Context) error { return f.s.PurgeFiles(ctx, fileIDs) })
}

func (f *fileGuard) ExpiredUploads(ctx context.Context, now time.Time, limit int) ([]parley.Upload, error) {
	return call(f.g, ctx, Read, func(ctx context.Context) ([]parley.Upload, error) { return f.s.ExpiredUploads(ctx, now, limit) })
}

func (f *fileGuard) DeleteWorkspaceFiles(ctx context.Context, workspaceID string) error {
	return do(f.g, ctx, Write, func(ctx context.Context) error { return f.s.DeleteWorkspaceFiles(ctx, workspaceID) })
}

func (f *fileGuard) FileSigningKey(ctx context.Context) ([]byte, error) {
	return call(f.g, ctx, Read, func(ctx context.Context) ([]byte, error) { return f.s.FileSigningKey(ctx) })
}

type integGuard struct {
	g *Guard
	s parley.IntegrationStore
}

func (i *integGuard) CreateBot(ctx context.Context, actor, workspaceID string, b parley.NewBot) (*parley.Bot, error) {
	return call(i.g, ctx, Write, func(ctx context.Context) (*parley.Bot, error) { return i.s.CreateBot(ctx, actor, workspaceID, b) })
}

func (i *integGuard) ListBots(ctx context.Context, actor, workspaceID string) ([]parley.Bot, error) {
	return call(i.g, ctx, Read, func(ctx context.Context) ([]parley.Bot, error) { return i.s.ListBots(ctx, actor, workspaceID) })
}

func (i *integGuard) RevokeBot(ctx context.Context, actor, workspaceID, botID string) error {
	return do(i.g, ctx, Write, func(ctx context.Context) error { return i.s.RevokeBot(ctx, actor, workspaceID, botID) })
}

func (i *integGuard) CreateBotToken(ctx context.Context, actor, workspaceID, botID string, t parley.NewBotToken) (*parley.BotToken, error) {
	return call(i.g, ctx, Write, func(ctx context.Context) (*parley.BotToken, error) {
		return i.s.CreateBotToken(ctx, actor, workspaceID, botID, t)
	})
}

func (i *integGuard) ListBotTokens(ctx context.Context, actor, workspaceID, botID string) ([]parley.BotToken, error) {
	return call(i.g, ctx, Read, func(ctx context.Context) ([]parley.BotToken, error) {
		return i.s.ListBotTokens(ctx, actor, workspaceID, botID)
	})
}

func (i *integGuard) RevokeBotToken(ctx context.Context, actor, workspaceID, tokenID string) error {
	return do(i.g, ctx, Write, func(ctx context.Context) error { return i.s.RevokeBotToken(ctx, actor, workspaceID, tokenID) })
}

func (i *integGuard) CreateWebhook(ctx context.Context, actor, channelID, name, secretHash string) (*parley.Webhook, error) {
	return call(i.g, ctx, Write, func(ctx context.Context) (*parley.Webhook, error) {
		return i.s.CreateWebhook(ctx, actor, channelID, name, secretHash)
	})
}

func (i *integGuard) ListWebhooks(ctx context.Context, actor, workspaceID string) ([]parley.Webhook, error) {
	return call(i.g, ctx, Read, func(ctx context.Context) ([]parley.Webhook, error) { return i.s.ListWebhooks(ctx, actor, workspaceID) })
}

func (i *integGuard) DeleteWebhook(ctx context.Context, actor, workspaceID, webhookID string) error {
	return do(i.g, ctx, Write, func(ctx context.Context) error { return i.s.DeleteWebhook(ctx, actor, workspaceID, webhookID) })
}

func (i *integGuard) WebhookByID(ctx context.Context, webhookID string) (*parley.Webhook, error) {
	return call(i.g, ctx, Read, func(ctx context.Context) (*parley.Webhook, error) { return i.s.WebhookByID(ctx, webhookID) })
}

func (i *integGuard) CreateIntegration(ctx context.Context, actor, workspaceID string, in parley.NewIntegration) (*parley.Integration, error) {
	return call(i.g, ctx, Write, func(ctx context.Context) (*parley.Integration, error) {
		return i.s.CreateIntegration(ctx, actor, workspaceID, in)
	})
}

func (i *integGuard) ListIntegrations(ctx context.Context, actor, workspaceID string) ([]parley.Integration, error) {
	return call(i.g, ctx, Read, func(ctx context.Context) ([]parley.Integration, error) {
		return i.s.ListIntegrations(ctx, actor, workspaceID)
	})
}

func (i *integGuard) DeleteIntegration(ctx context.Context, actor, workspaceID, id string) error {
	return do(i.g, ctx, Write, func(ctx context.Context) error { return i.s.DeleteIntegration(ctx, actor, workspaceID, id) })
}

func (i *integGuard) CommandByName(ctx context.Context, workspaceID, name string) (*parley.Integration, error) {
	return call(i.g, ctx, Read, func(ctx context.Context) (*parley.Integration, error) {
		return i.s.CommandByName(ctx, workspaceID, name)
	})
}

func (i *integGuard) Commands(ctx context.Context, workspaceID string) ([]parley.Integration, error) {
	return call(i.g, ctx, Read, func(ctx context.Context) ([]parley.Integration, error) { return i.s.Commands(ctx, workspaceID) })
}

func (i *integGuard) OutgoingWebhooks(ctx context.Context, workspaceID string) ([]parley.Integration, error) {
	return call(i.g, ctx, Read, func(ctx context.Context) ([]parley.Integration, error) { return i.s.OutgoingWebhooks(ctx, workspaceID) })
}

func (i *integGuard) GrantResponse(ctx context.Context, tokenHash string, r parley.CommandResponse, expires time.Time, maxUses int) error {
	return do(i.g, ctx, Write, func(ctx context.Context) error { return i.s.GrantResponse(ctx, tokenHash, r, expires, maxUses) })
}

func (i *integGuard) UseResponse(ctx context.Context, tokenHash string) (*parley.CommandResponse, error) {
	return call(i.g, ctx, Write, func(ctx context.Context) (*parley.CommandResponse, error) { return i.s.UseResponse(ctx, tokenHash) })
}

func (i *integGuard) SendEphemeral(ctx context.Context, workspaceID, userID string, m parley.EphemeralMessage) error {
	return do(i.g, ctx, Write, func(ctx context.Context) error { return i.s.SendEphemeral(ctx, workspaceID, userID, m) })
}

func (i *integGuard) Audit(ctx context.Context, workspaceID string, e parley.AuditEntry) error {
	return do(i.g, ctx, Write, func(ctx context.Context) error { return i.s.Audit(ctx, workspaceID, e) })
}

func (i *integGuard) AuditBots(ctx context.Context, entries []parley.AuditEntry) (int, error) {
	return call(i.g, ctx, Write, func(ctx context.Context) (int, error) { return i.s.AuditBots(ctx, entries) })
}

func (i *integGuard) BotAudit(ctx context.Context, actor, workspaceID, botID, cursor string, limit int) (*parley.AuditPage, error) {
	return call(i.g, ctx, History, func(ctx context.Context) (*parley.AuditPage, error) {
		return i.s.BotAudit(ctx, actor, workspaceID, botID, cursor, limit)
	})
}

func (i *integGuard) BotWorkspace(ctx context.Context, botID string) (string, error) {
	return call(i.g, ctx, Read, func(ctx context.Context) (string, error) { return i.s.BotWorkspace(ctx, botID) })
}
