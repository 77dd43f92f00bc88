package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"

	"parley"
	"parley/bench/internal/benchkit"
	pclient "parley/client"
)

// parleyTarget is `parley serve` (SQLite, embedded NATS) with a seeded
// workspace whose users are all in #general.
type parleyTarget struct {
	srv     *benchkit.Parley
	seed    *benchkit.SeedFile
	eng     *benchkit.RawEngine
	wsURL   string
	poster  *pclient.Client
	channel string
}

func newParleyTarget(ctx context.Context, cfg Config, dir string, n int, eng *benchkit.RawEngine, hc *http.Client) (*parleyTarget, error) {
	seed, err := benchkit.Seed(ctx, cfg.Parley, dir, "", n)
	if err != nil {
		return nil, err
	}
	srv, err := benchkit.StartParley(ctx, cfg.Parley, dir, "")
	if err != nil {
		return nil, err
	}
	if cfg.ParleyLive != "" {
		if err := srv.SetLive(ctx, cfg.ParleyLive); err != nil {
			srv.Stop()
			return nil, err
		}
	}
	return &parleyTarget{
		srv: srv, seed: seed, eng: eng,
		wsURL:   "ws://" + strings.TrimPrefix(srv.URL, "http://") + "/api/v1/gateway",
		poster:  pclient.New(srv.URL, pclient.WithToken(seed.Owner.Token), pclient.WithHTTPClient(hc), pclient.WithLogger(cfg.Log)),
		channel: seed.Channels[0].ID, // #general: everyone is in it
	}, nil
}

func (p *parleyTarget) proc() *benchkit.Proc { return p.srv.Proc }

func (p *parleyTarget) connect(ctx context.Context, i int, onPayload func([]byte)) (subscriber, error) {
	u := p.seed.Users[i]
	c, err := p.eng.DialParley(ctx, p.wsURL, u.Token, p.seed.WorkspaceID, func(tail []byte) {
		if bytes.HasPrefix(tail, messageCreated) { // not the unread summaries and the like
			onPayload(tail)
		}
	}, p.channel) // on screen, as Centrifugo's subscribers are subscribed
	if err != nil {
		return nil, err
	}
	return parleySub{c}, nil
}

func (p *parleyTarget) connected() { go p.eng.Heartbeats(p.eng.HeartbeatInterval() * 9 / 10) }

func (p *parleyTarget) publish(ctx context.Context, m publication) error {
	_, err := p.poster.PostMessage(ctx, p.channel, parley.NewMessage{Text: m.text})
	return err
}

func (p *parleyTarget) close() { p.srv.Stop() }

var messageCreated = []byte(`,"t":"` + parley.EventMessageCreated + `"`)

type parleySub struct{ c *benchkit.ParleyConn }

func (s parleySub) close()                { s.c.Close() }
func (s parleySub) done() <-chan struct{} { return s.c.Closed() }
func (s parleySub) drops() int64          { return s.c.Drops() }

// centrifugoTarget is Centrifugo with the benchmark's configuration.
type centrifugoTarget struct {
	srv   *centrifugo
	eng   *benchkit.RawEngine
	wsURL string
}

func newCentrifugoTarget(ctx context.Context, cfg Config, dir string, eng *benchkit.RawEngine, hc *http.Client) (*centrifugoTarget, error) {
	if cfg.Centrifugo == "" {
		return nil, errors.New("no centrifugo binary")
	}
	srv, err := startCentrifugo(ctx, cfg.Centrifugo, dir, hc, nil)
	if err != nil {
		return nil, err
	}
	return &centrifugoTarget{srv: srv, eng: eng,
		wsURL: "ws://" + strings.TrimPrefix(srv.url, "http://") + "/connection/websocket"}, nil
}

func (c *centrifugoTarget) proc() *benchkit.Proc { return c.srv.Proc }

func (c *centrifugoTarget) connect(ctx context.Context, _ int, onPayload func([]byte)) (subscriber, error) {
	conn, err := dialCentrifugo(ctx, c.eng, c.wsURL, onPayload)
	if err != nil {
		return nil, err
	}
	return conn, nil
}

func (c *centrifugoTarget) connected() {} // the server pings; the client answers (dialCentrifugo)

func (c *centrifugoTarget) publish(ctx context.Context, m publication) error {
	return c.srv.publish(ctx, m.object)
}

func (c *centrifugoTarget) close() { c.srv.Stop() }

func (c *cfConn) done() <-chan struct{} { return c.closed }
func (c *cfConn) drops() int64          { return c.dropped.Load() }
