package client

import (
	"encoding/json"
	"testing"

	"parley"
)

func TestParseEventFrame(t *testing.T) {
	d := `{"channel_id":"C1","seq":7,"message":{"id":"M1","text":"a \"quoted\" }"}}`
	s, typ, data, ok := parseEventFrame([]byte(`{"op":"event","s":42,"t":"message.created","d":` + d + `}`))
	if !ok || s != 42 || typ != "message.created" || string(data) != d {
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
		if _, _, _, ok := parseEventFrame([]byte(raw)); ok {
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
		_, _, d, _ := parseEventFrame(frame)
		channelPosition(d)
	}
}
