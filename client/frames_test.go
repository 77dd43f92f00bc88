package client

import (
	"bytes"
	"encoding/json"
	"testing"

	"parley"
)

func TestParseEventFrame(t *testing.T) {
	d := `{"channel_id":"C1","seq":7,"message":{"id":"M1","text":"a \"quoted\" }"}}`
	s, typ, data, users, ok := parseEventFrame([]byte(`{"op":"event","s":42,"t":"message.created","d":` + d + `}`))
	if !ok || s != 42 || typ != "message.created" || string(data) != d || users != nil {
		t.Fatalf("fast path: %v %d %q %s", ok, s, typ, data)
	}
	if ch, seq := channelPosition(data); ch != "C1" || seq != 7 {
		t.Errorf("position %q %d", ch, seq)
	}
	for _, raw := range []string{
		`{"s":1,"op":"event","t":"x","d":{}}`,
		`{"op":"event","s":1,"t":"x\u0041","d":{}}`,
		`{"op":"event","s":,"t":"x","d":{}}`,
		`{"op":"event","s":1,"t":"x","d":}`,
		`{"op":"hello","heartbeat_ms":1}`,
		`{"op":"event","s":1,"t":"x","d":{}} `,
	} {
		if _, _, _, _, ok := parseEventFrame([]byte(raw)); ok {
			t.Errorf("fast path took %s", raw)
		}
	}
}

func TestChannelPosition(t *testing.T) {
	for d, want := range map[string]struct {
		ch  string
		seq int64
	}{
		`{"channel_id":"C1","seq":3}`:                    {"C1", 3},
		`{"seq":3,"channel_id":"C1"}`:                    {"C1", 3},
		`{"channel_id":"C1","last_read_seq":9}`:          {"C1", 0},
		`{"channel_id":"C1","user_id":"U1"}`:             {"C1", 0},
		`{"user_id":"U1","presence":"online"}`:           {"", 0},
		`{"channel":{"id":"D1","seq":4}}`:                {"", 0},
		`{"channel_id":"C\"1","seq":3}`:                  {`C"1`, 3},
		`[1,2]`:                                          {"", 0},
		`{"channel_id":"C1","seq":99999999999999999999}`: {"", 0},
	} {
		ch, seq := channelPosition([]byte(d))
		if ch != want.ch || seq != want.seq {
			t.Errorf("%s: %q %d", d, ch, seq)
		}
	}
}

// The slow path decodes frames laid out differently.
func TestEventFrameSlowPath(t *testing.T) {
	var f inFrame
	raw := `{"t":"reaction.added","d":{"seq":5,"channel_id":"C2","emoji":"x"},"s":3,"op":"event"}`
	if err := json.Unmarshal([]byte(raw), &f); err != nil || f.Op != parley.OpEvent || f.S != 3 {
		t.Fatalf("%+v %v", f, err)
	}
	if ch, seq := channelPosition(f.D); ch != "C2" || seq != 5 {
		t.Errorf("position %q %d", ch, seq)
	}
}

func BenchmarkParseEventFrame(b *testing.B) {
	frame := []byte(`{"op":"event","s":123456,"t":"message.created","d":{"channel_id":"C01JABCDEFGHJKMNPQRSTVWXYZ","seq":98765,"message":{"id":"M01JABCDEFGHJKMNPQRSTVWXYZ","text":"hello there, this is a two hundred byte message body used to measure the cost of decoding a frame on the client side"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		_, _, d, _, _ := parseEventFrame(frame)
		channelPosition(d)
	}
}

// FuzzParseEventFrame holds the fast path to the full decoder: on a frame
// that is valid JSON, whatever the fast path takes it must read exactly as
// json.Unmarshal does (s, t, d and users); on anything else it may decline
// but must not panic, and what it returns lies within the frame.
func FuzzParseEventFrame(f *testing.F) {
	for _, seed := range []string{
		`{"op":"event","s":1,"t":"message.created","d":{"channel_id":"C1","seq":2,"message":{"id":"M1","text":"hi"}}}`,
		`{"op":"event","s":2,"t":"message.created","d":{"channel_id":"C1","seq":3,"message":{"text":"a \"q\" ]}"}},"users":[{"id":"U1","name":"A"}]}`,
		`{"op":"event","s":3,"t":"typing.started","d":{"channel_id":"C1","user_id":"U1"}}`,
		`{"op":"event","s":4,"t":"x","d":{},"d":{"a":1}}`,
		`{"op":"event","s":5,"t":"x","d":[1,{"users":[2]}],"users":[]}`,
		`{"op":"event","s":6,"t":"x","d":"str\\","users":null}`,
		`{"op":"event","s":7,"t":"x","d":12,"users":[]}`,
		`{"op":"hello","heartbeat_ms":41250,"resume_window_s":120}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, typ, d, users, ok := parseEventFrame(b)
		if !ok {
			return
		}
		if len(d) == 0 || (users != nil && users[0] != '[') {
			t.Fatalf("took %q: d %q users %q", b, d, users)
		}
		if !json.Valid(b) {
			return
		}
		var f inFrame
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatalf("valid frame %q does not decode: %v", b, err)
		}
		if f.Op != parley.OpEvent || f.S != s || f.T != typ || !bytes.Equal(f.D, d) {
			t.Fatalf("frame %q: fast s=%d t=%q d=%q; full s=%d t=%q d=%q", b, s, typ, d, f.S, f.T, f.D)
		}
		if !json.Valid(d) || (users != nil && !json.Valid(users)) {
			t.Fatalf("frame %q: fast path d %q users %q not JSON", b, d, users)
		}
		if fu := f.Users; !bytes.Equal(fu, users) && !(users == nil && string(fu) == "null") {
			t.Fatalf("frame %q: fast users %q, full %q", b, users, fu)
		}
	})
}
