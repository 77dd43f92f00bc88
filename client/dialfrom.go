package client

import (
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lesismal/nbio"
	"github.com/lesismal/nbio/nbhttp"
	"github.com/lesismal/nbio/nbhttp/websocket"
)

// dialFrom opens a plain ws:// WebSocket from a chosen local address. The
// library's Dialer cannot bind the local side, and a load tester needs it:
// one source and destination address pair has only ~28,000 ephemeral
// ports, so tens of thousands of sockets to one gateway must leave from
// several 127.0.0.x addresses. It runs the upgrade itself on the engine's
// HTTP client connection (whose dial function can be set) and then turns
// the socket into a WebSocket on the engine, as the library's Dialer does.
func dialFrom(ctx context.Context, eng *nbhttp.Engine, u *websocket.Upgrader, rawURL string, header http.Header,
	timeout time.Duration, local net.Addr) (*websocket.Conn, error) {
	target, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if target.Scheme != "ws" {
		return nil, fmt.Errorf("a local address needs a ws:// URL, not %q", rawURL)
	}
	target.Scheme = "http"
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	key := base64.StdEncoding.EncodeToString(nonce[:])
	req := &http.Request{Method: http.MethodGet, URL: target, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header), Host: target.Host}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Sec-WebSocket-Key", key)
	req.Header.Set("Sec-WebSocket-Version", "13")

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	nd := &net.Dialer{Timeout: timeout, LocalAddr: local}
	cc := &nbhttp.ClientConn{Engine: eng, Timeout: timeout,
		Dial: func(network, addr string) (net.Conn, error) { return nd.DialContext(ctx, network, addr) }}
	type result struct {
		ws  *websocket.Conn
		err error
	}
	done := make(chan result, 1)
	cc.Do(req, func(res *http.Response, conn net.Conn, err error) {
		if err == nil {
			err = checkUpgrade(res, key)
		}
		var nbc *nbio.Conn
		var parser *nbhttp.Parser
		if err == nil {
			var ok1, ok2 bool
			nbc, ok1 = conn.(*nbio.Conn)
			if ok1 {
				parser, ok2 = nbc.Session().(*nbhttp.Parser)
			}
			if !ok1 || !ok2 {
				err = errors.New("websocket dial: unexpected connection type")
			}
		}
		if err != nil {
			done <- result{err: err}
			return
		}
		ws := websocket.NewClientConn(u, conn, "", false, false)
		parser.ParserCloser = ws
		ws.Engine, ws.Execute = parser.Engine, parser.Execute
		nbc.SetSession(ws)
		done <- result{ws: ws}
	})
	select {
	case r := <-done:
		if r.err != nil {
			cc.CloseWithError(r.err)
		}
		return r.ws, r.err
	case <-ctx.Done():
		cc.CloseWithError(ctx.Err())
		return nil, ctx.Err()
	}
}

// checkUpgrade verifies a 101 answer to the upgrade with key.
func checkUpgrade(res *http.Response, key string) error {
	if res == nil || res.StatusCode != http.StatusSwitchingProtocols ||
		!strings.EqualFold(res.Header.Get("Upgrade"), "websocket") {
		return ErrUpgradeRefused
	}
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if res.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(h[:]) {
		return fmt.Errorf("%w: bad Sec-WebSocket-Accept", ErrUpgradeRefused)
	}
	return nil
}
