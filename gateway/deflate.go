package gateway

import (
	"bytes"
	"compress/flate"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/prometheus/client_golang/prometheus"

	"parley/internal/promutil"
)

// permessage-deflate (RFC 7692), compressed once per event rather than once
// per connection (docs/gateway.md, "Compression").
//
// nbio negotiates the extension at the upgrade, always as
// server_no_context_takeover and client_no_context_takeover: every message
// is a deflate stream of its own, with no history from earlier messages.
// That is what lets one compressed body serve every session. An event
// frame's payload differs between sessions only in its prefix,
// `{"op":"event","s":N`; the rest, the tail, is the same for every session
// that gets the same variant of the event (the shared tail, the author's
// ownTail, a just-in-time users variant). So a compressed frame is
//
//	stored block (BFINAL=0): the session's prefix, as is
//	the tail, deflated once and sync-flushed, minus the final 00 00 ff ff
//
// which inflates to exactly the uncompressed frame. The stored block ends
// on a byte boundary and a deflate stream begins on one, so the two parts
// are simply concatenated. The tail is compressed lazily, the first time a
// partition writes it to a session that negotiated the extension, under a
// sync.Once of its own: events are shared by every partition, and none
// compresses a tail twice.
//
// Frames that are not events (hello, ready, acks) go through nbio
// uncompressed: the gateway turns nbio's own per-connection compression
// off on every connection. RSV1 is per message, so mixing is allowed.

// deflateLevel: the tail is compressed once per event, not per session, so
// the best ratio is affordable.
const deflateLevel = flate.BestCompression

// deflateTrailer is the empty stored block a sync flush ends with; RFC 7692
// drops it from the message and the receiver puts it back.
var deflateTrailer = []byte{0x00, 0x00, 0xff, 0xff}

// storedHeaderLen is a stored block's header at a byte boundary: one byte
// of BFINAL/BTYPE (and padding), LEN and NLEN.
const storedHeaderLen = 5

// deflated is a tail's compressed form, computed on first use.
type deflated struct {
	once sync.Once
	body []byte // raw deflate data of the tail, sync-flushed, without deflateTrailer
	ok   bool   // false: compression does not pay (or failed); send the tail as is
}

var deflaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, deflateLevel) // a valid level never fails
	return w
}}

// get returns the compressed tail, or false if the frame should go out
// uncompressed. A nil d (an event built without one) never compresses.
func (d *deflated) get(tail []byte, m *deflateMetrics) ([]byte, bool) {
	if d == nil {
		return nil, false
	}
	d.once.Do(func() {
		d.body, d.ok = deflateTail(tail)
		if m != nil {
			m.tails.Inc()
		}
	})
	return d.body, d.ok
}

// deflateTail compresses tail as the continuation of a message whose prefix
// went out in a stored block: a deflate stream that is not final, flushed
// to a byte boundary, without the flush's empty stored block. It reports
// false when the result (with the prefix's stored-block header) is not
// smaller than tail.
func deflateTail(tail []byte) ([]byte, bool) {
	var buf bytes.Buffer
	buf.Grow(len(tail)/2 + 64)
	w := deflaters.Get().(*flate.Writer)
	w.Reset(&buf)
	_, err := w.Write(tail)
	if err == nil {
		err = w.Flush()
	}
	w.Reset(io.Discard) // drop the reference to buf before pooling
	deflaters.Put(w)
	b := buf.Bytes()
	if err != nil || !bytes.HasSuffix(b, deflateTrailer) {
		return nil, false
	}
	b = b[:len(b)-len(deflateTrailer)]
	if storedHeaderLen+len(b) >= len(tail) {
		return nil, false
	}
	return bytes.Clone(b), true
}

// appendDeflateFrame appends a whole server-to-client WebSocket frame (FIN,
// RSV1, text; unmasked) for the event with session seq s whose compressed
// tail is body: the prefix in a stored block, then body.
func appendDeflateFrame(dst []byte, s uint64, body []byte) []byte {
	var num [20]byte
	digits := strconv.AppendUint(num[:0], s, 10)
	plen := len(eventPrefix) + len(digits)
	n := storedHeaderLen + plen + len(body)
	dst = append(dst, 0x80|0x40|byte(websocket.TextMessage))
	switch {
	case n < 126:
		dst = append(dst, byte(n))
	case n <= 0xFFFF:
		dst = append(dst, 126, byte(n>>8), byte(n))
	default:
		dst = append(dst, 127, 0, 0, 0, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	// BFINAL=0, BTYPE=00 (stored), padded to the byte; LEN, NLEN little-endian.
	dst = append(dst, 0x00, byte(plen), byte(plen>>8), ^byte(plen), ^byte(plen>>8))
	dst = append(dst, eventPrefix...)
	dst = append(dst, digits...)
	return append(dst, body...)
}

// deflateSink is a sink that can take whole frames: the gateway's
// connections (test sinks that are not stay uncompressed).
type deflateSink interface {
	sink
	// deflate reports whether the connection negotiated permessage-deflate
	// in a form the shared frames suit.
	deflate() bool
	// frame writes one whole WebSocket frame, as one write.
	frame(b []byte) bool
}

var _ deflateSink = (*conn)(nil)

func (c *conn) deflate() bool { return c.nb != nil && c.nb.deflate.Load() }

func (c *conn) frame(b []byte) bool {
	if c.gone.Load() {
		return false
	}
	_, err := c.nb.Write(b) // corked: gathered with the flush's other frames
	return err == nil
}

// deflateState is a partition's view of the live compression settings
// (read at most once per batch) and its counts not yet added to the
// metrics. Owned by the partition goroutine.
type deflateState struct {
	at  int64 // p.now when on and min were read; 0: never
	on  bool
	min int

	compressed, plain, saved int
}

// deflateFor returns c as a deflateSink if this flush may compress to it.
func (p *partition) deflateFor(c sink) deflateSink {
	z := &p.deflate
	if z.at != p.now || z.at == 0 {
		cfg := p.env.live.LiveConfig()
		z.at, z.on, z.min = p.now, cfg.GatewayCompression, cfg.GatewayCompressionMinBytes
	}
	if !z.on {
		return nil
	}
	if d, ok := c.(deflateSink); ok && d.deflate() {
		return d
	}
	return nil
}

// writeEvent writes the event e with session seq s to c: compressed when z
// is not nil and the frame is large enough to be worth it. It returns the
// bytes written and false if the socket is closing.
func (p *partition) writeEvent(c sink, z deflateSink, s uint64, e *event) (int, bool) {
	st := &p.deflate
	if z != nil && len(eventPrefix)+len(e.tail) >= st.min {
		if body, ok := e.z.get(e.tail, p.env.deflate); ok {
			p.scratch = appendDeflateFrame(p.scratch[:0], s, body)
			st.compressed++
			st.saved += wsFrameSize(len(eventPrefix)+digitsOf(s)+len(e.tail)) - len(p.scratch)
			return len(p.scratch), z.frame(p.scratch)
		}
	}
	p.scratch = appendEventFrame(p.scratch[:0], s, e.tail)
	st.plain++
	return len(p.scratch), c.text(p.scratch)
}

// publishDeflate adds the partition's counts to the metrics.
func (p *partition) publishDeflate() {
	st, m := &p.deflate, p.env.deflate
	if st.compressed > 0 {
		m.compressed.Add(float64(st.compressed))
		m.saved.Add(float64(st.saved))
		st.compressed, st.saved = 0, 0
	}
	if st.plain > 0 {
		m.plain.Add(float64(st.plain))
		st.plain = 0
	}
}

// wsFrameSize is the size of an unmasked frame with an n-byte payload.
func wsFrameSize(n int) int {
	switch {
	case n < 126:
		return 2 + n
	case n <= 0xFFFF:
		return 4 + n
	}
	return 10 + n
}

func digitsOf(s uint64) int {
	n := 1
	for s >= 10 {
		s /= 10
		n++
	}
	return n
}

type deflateMetrics struct {
	compressed prometheus.Counter
	plain      prometheus.Counter
	saved      prometheus.Counter
	tails      prometheus.Counter
}

func newDeflateMetrics(reg prometheus.Registerer) *deflateMetrics {
	frames := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "parley_gateway_event_frames_total",
		Help: "Event frames written to sockets, by whether they went out compressed (permessage-deflate)."}, []string{"compressed"})
	frames = promutil.Register(reg, frames)
	m := &deflateMetrics{
		compressed: frames.WithLabelValues("true"),
		plain:      frames.WithLabelValues("false"),
		saved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_deflate_saved_bytes_total",
			Help: "Bytes that compressed event frames saved on the wire against the same frames uncompressed."}),
		tails: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "parley_gateway_deflate_tails_total",
			Help: "Event tails compressed: once per event variant, however many sessions get it."}),
	}
	m.saved = promutil.Register(reg, m.saved)
	m.tails = promutil.Register(reg, m.tails)
	return m
}

// inflateLimit is nbio's decompressor for compressed client frames,
// bounded: it inflates at most limit bytes of a message and fails the
// message with ErrMessageTooLarge (nbio closes 1009) beyond that, so a
// small compressed frame cannot inflate into a large one. nbio takes RSV1
// frames from every connection once the upgrader enables compression; a
// connection that did not negotiate it has its socket closed, as RFC 7692
// asks.
func inflateLimit(limit int) func(*websocket.Conn, io.Reader) io.ReadCloser {
	return func(wsc *websocket.Conn, r io.Reader) io.ReadCloser {
		if wsc != nil { // nil: a unit test
			if c, ok := wsc.Session().(*conn); ok && (c.nb == nil || !c.nb.negotiated.Load()) {
				return refused{}
			}
		}
		fr, _ := inflaters.Get().(io.ReadCloser)
		if fr == nil {
			fr = flate.NewReader(r)
		} else if err := fr.(flate.Resetter).Reset(r, nil); err != nil {
			fr = flate.NewReader(r)
		}
		return &limitedInflater{fr: fr, left: limit}
	}
}

var inflaters sync.Pool

// refused fails a compressed message from a connection that did not
// negotiate compression.
type refused struct{}

func (refused) Read([]byte) (int, error) { return 0, websocket.ErrReserveBitSet }
func (refused) Close() error             { return nil }

type limitedInflater struct {
	fr   io.ReadCloser
	left int // bytes the message may still inflate to
}

func (l *limitedInflater) Read(p []byte) (int, error) {
	if l.fr == nil {
		return 0, io.ErrClosedPipe
	}
	if len(p) > l.left+1 {
		p = p[:l.left+1] // one byte past the limit tells a message over it
	}
	n, err := l.fr.Read(p)
	if n > l.left {
		return 0, websocket.ErrMessageTooLarge
	}
	l.left -= n
	return n, err
}

func (l *limitedInflater) Close() error {
	if l.fr == nil {
		return nil
	}
	err := l.fr.Close()
	inflaters.Put(l.fr)
	l.fr = nil
	return err
}

// offersWindowLimit reports whether the client's permessage-deflate offer
// limits the server's window (server_max_window_bits): nbio accepts the
// offer without the parameter, and a shared tail is compressed with the
// full 32 KiB window, so such a connection gets uncompressed frames.
func offersWindowLimit(h []string) bool {
	for _, v := range h {
		if strings.Contains(strings.ToLower(v), "server_max_window_bits") {
			return true
		}
	}
	return false
}
