package gateway

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/lesismal/nbio/nbhttp/websocket"
	"github.com/prometheus/client_golang/prometheus"
)

// wireFrame is one server-to-client frame read off the wire.
type wireFrame struct {
	fin, rsv1 bool
	opcode    byte
	payload   []byte
	size      int // header included
}

// parseWireFrame reads the frame at the start of b (unmasked, as a server
// sends). ok is false if b does not hold a whole frame.
func parseWireFrame(b []byte) (f wireFrame, ok bool) {
	if len(b) < 2 {
		return f, false
	}
	f.fin, f.rsv1, f.opcode = b[0]&0x80 != 0, b[0]&0x40 != 0, b[0]&0x0f
	if b[1]&0x80 != 0 {
		return f, false // masked: not a server frame
	}
	n, h := int(b[1]&0x7f), 2
	switch n {
	case 126:
		if len(b) < 4 {
			return f, false
		}
		n, h = int(binary.BigEndian.Uint16(b[2:])), 4
	case 127:
		if len(b) < 10 {
			return f, false
		}
		n, h = int(binary.BigEndian.Uint64(b[2:])), 10
	}
	if len(b) < h+n {
		return f, false
	}
	f.payload, f.size = b[h:h+n], h+n
	return f, true
}

// inflateMessage inflates a compressed message's payload the way RFC 7692
// says a receiver does: append 00 00 ff ff and inflate. It fails if the
// stream holds anything past the message (a final block, trailing data).
func inflateMessage(payload []byte) ([]byte, error) {
	in := append(bytes.Clone(payload), 0x00, 0x00, 0xff, 0xff)
	r := flate.NewReader(bytes.NewReader(in))
	var out bytes.Buffer
	_, err := io.Copy(&out, r)
	// The message is not a final block, so the reader runs out of input
	// right after the flush marker: that, and only that, is the end.
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("inflate: %v (want the stream to stop after the flush marker)", err)
	}
	return out.Bytes(), nil
}

// checkDeflateFrame builds the compressed frame of tail for s, and checks
// that it is one whole FIN|RSV1|text frame that inflates to exactly the
// uncompressed frame.
func checkDeflateFrame(t *testing.T, s uint64, tail []byte) (compressed, plain int, ok bool) {
	t.Helper()
	body, ok := deflateTail(tail)
	want := appendEventFrame(nil, s, tail)
	if !ok {
		return 0, wsFrameSize(len(want)), false
	}
	frame := appendDeflateFrame(nil, s, body)
	f, whole := parseWireFrame(frame)
	if !whole || f.size != len(frame) {
		t.Fatalf("s=%d: frame of %d bytes does not parse as one frame (%+v)", s, len(frame), f)
	}
	if !f.fin || !f.rsv1 || f.opcode != 1 {
		t.Fatalf("s=%d: header %08b, want FIN|RSV1|text", s, frame[0])
	}
	got, err := inflateMessage(f.payload)
	if err != nil {
		t.Fatalf("s=%d tail %q: %v", s, tail, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("s=%d: inflated\n%q\nwant\n%q", s, got, want)
	}
	return len(frame), wsFrameSize(len(want)), true
}

// TestDeflateFrameInflates: a compressed event frame (the session's prefix
// in a stored block, then the shared compressed tail) inflates, by the
// RFC's rule, to exactly the uncompressed frame, for prefixes of every
// length of s and tails of every kind: corpus text cut anywhere, JSON
// escapes, random bytes (which do not compress, and go out plain), and
// tails long enough for the 16- and 64-bit payload lengths.
func TestDeflateFrameInflates(t *testing.T) {
	corpus := []byte(corpusText(t, 1282))
	rng := rand.New(rand.NewPCG(20, 4))
	seqs := []uint64{0, 1, 9, 10, 99, 12345, 1<<32 + 7, 1<<64 - 1}
	var tails [][]byte
	for range 200 {
		i := rng.IntN(len(corpus))
		j := i + rng.IntN(len(corpus)-i)
		tails = append(tails, fmt.Appendf(nil, `,"t":"message.created","d":{"text":%q}}`, corpus[i:j]))
	}
	for range 50 {
		b := make([]byte, rng.IntN(600))
		for k := range b {
			b[k] = byte(rng.Uint32())
		}
		tails = append(tails, b)
	}
	tails = append(tails,
		[]byte(`}`),
		[]byte(`,"t":"typing.started","d":{"channel_id":"c1","user_id":"u1"}}`),
		bytes.Repeat([]byte(`,"x":"\u003c\"q\"\u003e"`), 3000),              // 16-bit length
		[]byte(`,"d":"`+strings.Repeat("abcdefgh", 20000)+`"}`),             // 16-bit, compressed small
		[]byte(`,"d":"`+strings.Repeat(strconv.Itoa(rng.Int()), 9000)+`"}`), // 64-bit plain length
	)
	compressedOK := 0
	for i, tail := range tails {
		s := seqs[i%len(seqs)]
		if i%3 == 0 {
			s = rng.Uint64N(1 << uint(1+rng.IntN(63)))
		}
		if _, _, ok := checkDeflateFrame(t, s, tail); ok {
			compressedOK++
		} else if len(tail) > 200 && bytes.HasPrefix(tail, []byte(`,"t"`)) {
			t.Fatalf("a %d-byte JSON tail did not compress: %q", len(tail), tail)
		}
	}
	if compressedOK < 150 {
		t.Fatalf("only %d of %d tails compressed", compressedOK, len(tails))
	}
}

// TestDeflateTailOnce: the compressed tail is computed once however many
// goroutines ask for it at once, and all of them get the same bytes.
func TestDeflateTailOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newDeflateMetrics(reg)
	d := new(deflated)
	tail := []byte(`,"t":"message.created","d":{"text":"` + corpusText(t, 300) + `"}}`)
	const n = 8
	got := make(chan []byte, n)
	for range n {
		go func() {
			b, _ := d.get(tail, m)
			got <- b
		}()
	}
	first := <-got
	for range n - 1 {
		if b := <-got; &b[0] != &first[0] {
			t.Fatal("two goroutines got different compressed tails")
		}
	}
	if v := counterValue(t, reg, "parley_gateway_deflate_tails_total"); v != 1 {
		t.Fatalf("tail compressed %v times, want 1", v)
	}
	var nilD *deflated
	if _, ok := nilD.get(tail, m); ok {
		t.Fatal("an event without a holder compressed")
	}
}

// TestInflateLimit: a compressed client frame inflates to at most the
// limit; one byte more fails the message with nbio's ErrMessageTooLarge.
func TestInflateLimit(t *testing.T) {
	compress := func(b []byte) io.Reader {
		var buf bytes.Buffer
		w, _ := flate.NewWriter(&buf, flate.BestCompression)
		w.Write(b)
		w.Close()
		return &buf
	}
	open := inflateLimit(1000)
	for _, c := range []struct {
		n    int
		fail bool
	}{{0, false}, {999, false}, {1000, false}, {1001, true}, {1 << 20, true}} {
		r := open(nil, compress(bytes.Repeat([]byte{' '}, c.n)))
		got, err := io.ReadAll(r)
		r.Close()
		if c.fail {
			if !errors.Is(err, websocket.ErrMessageTooLarge) {
				t.Fatalf("%d bytes: err %v, want message too large", c.n, err)
			}
			continue
		}
		if err != nil || len(got) != c.n {
			t.Fatalf("%d bytes: got %d, %v", c.n, len(got), err)
		}
	}
}

func TestOffersWindowLimit(t *testing.T) {
	for h, want := range map[string]bool{
		"permessage-deflate; client_max_window_bits":                                 false,
		"permessage-deflate; server_no_context_takeover; client_no_context_takeover": false,
		"permessage-deflate; server_max_window_bits=10":                              true,
		"x-webkit-deflate-frame, permessage-deflate; Server_Max_Window_Bits=12":      true,
	} {
		if got := offersWindowLimit([]string{h}); got != want {
			t.Errorf("%q: %v, want %v", h, got, want)
		}
	}
}

// BenchmarkDeflateTail is the once-per-event cost of compressing a
// message.created tail with 200 bytes of text.
func BenchmarkDeflateTail(b *testing.B) {
	text := corpusText(b, 200)
	tail := fmt.Appendf(nil, `,"t":"message.created","d":{"channel_id":"01JF6ZP8Q4W9X3V2N7K5M1R0TA","seq":42,"message":{"id":"01JF6ZP8Q4W9X3V2N7K5M1R0TB","channel_id":"01JF6ZP8Q4W9X3V2N7K5M1R0TA","seq":42,"user_id":"01JF6ZP8Q4W9X3V2N7K5M1R0TC","text":%q,"created_at":"2026-11-24T20:00:00.123456Z","reply_count":0}}}`, text)
	var n int
	for b.Loop() {
		body, _ := deflateTail(tail)
		n = len(body)
	}
	b.ReportMetric(float64(n), "bytes")
	b.ReportMetric(float64(len(tail)), "plain-bytes")
}
