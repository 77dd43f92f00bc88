package gateway

import (
	"context"
	"time"

	"parley"
)

// Bots and their workspace's integrations feature. A workspace whose
// tenant directory entry turns integrations off (parley workspaces set …
// --feature integrations=false) refuses its bots' API calls with 403
// feature_disabled; here their gateway sessions follow:
//
//   - identify and resume with a bot token answer 4004 (auth_failed, which
//     clients do not retry) while the feature is off;
//   - CloseBots, called by the node when its directory client hears the
//     change, closes the bots' sessions of that workspace on this node,
//     attached or waiting for a resume, with 4004.

// botAllowed returns EFEATUREOFF when bot is set and ws has integrations
// off. A lookup that fails lets the bot in: the API, too, goes on with the
// global defaults when the directory does not answer.
func (g *Gateway) botAllowed(ctx context.Context, bot bool, ws string) error {
	if !bot || g.cfg.WorkspaceLimits == nil {
		return nil
	}
	wl, err := g.cfg.WorkspaceLimits(ctx, ws)
	if err != nil {
		if parley.ErrorCode(err) != parley.ENOTFOUND {
			g.log.Warn("gateway: workspace limits lookup failed; a bot session goes on", "workspace_id", ws, "err", err)
		}
		return nil
	}
	return wl.CheckFeature(parley.FeatureIntegrations)
}

// CloseBots closes every bot session of workspaceID on this node with
// 4004: the workspace turned integrations off. It does not wait for the
// partitions.
//
// A bot identified or handed over meanwhile may have passed its check
// before the change and reach its partition after CloseBots's pass: each
// call takes a generation and marks the workspace with it, every bot
// session notes the generation its check began in (session.botGen), and a
// partition placing a bot session of a workspace marked since then closes
// it (partition.place). A mark older than botsOffKeep is dropped: no check
// takes that long.
func (g *Gateway) CloseBots(workspaceID string) {
	now := g.now()
	g.botsOff.Store(workspaceID, botsOffMark{gen: g.botGen.Add(1), at: now})
	g.botsOff.Range(func(k, v any) bool {
		if now.Sub(v.(botsOffMark).at) > botsOffKeep {
			g.botsOff.CompareAndDelete(k, v)
		}
		return true
	})
	for _, p := range g.parts {
		p.postAsync(func() {
			for s := range p.sessions {
				if s.workspaceID == workspaceID && s.isBot() {
					p.closeBot(s)
				}
			}
		})
	}
}

// botsOffKeep is how long CloseBots's mark of a workspace is kept.
const botsOffKeep = 10 * time.Minute

// botsOffMark is a workspace's latest CloseBots: its generation and time.
type botsOffMark struct {
	gen uint64
	at  time.Time
}

// botsClosedSince reports whether CloseBots ran for ws after generation gen.
func (g *Gateway) botsClosedSince(ws string, gen uint64) bool {
	v, ok := g.botsOff.Load(ws)
	return ok && v.(botsOffMark).gen > gen
}

// closeBot closes bot session s, unless it is closed already, because its
// workspace turned integrations off; on the partition goroutine.
func (p *partition) closeBot(s *session) {
	if s.removed {
		return
	}
	p.kill(s, parley.CloseAuthFailed, "integrations turned off")
	p.env.metrics.botCloses.Inc()
}

func (s *session) isBot() bool { return s.bot.Load() }
func (s *session) markBot()    { s.bot.Store(true) }
