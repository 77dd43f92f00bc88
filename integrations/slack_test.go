package integrations

import (
	"errors"
	"flag"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.md from the renderer")

// TestRenderFixtures renders payloads of the shapes real tools send
// (written from their documented formats: Alertmanager's Slack receiver,
// Grafana's Slack contact point, slackapi/slack-github-action with an
// incoming webhook, and a plain curl) and compares each with its
// reviewed rendering in testdata/NAME.md.
func TestRenderFixtures(t *testing.T) {
	for _, name := range []string{"alertmanager", "grafana", "github-actions", "curl"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			p, err := ParsePayload("application/json", raw)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			got, err := Render(p)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			golden := filepath.Join("testdata", name+".md")
			if *update {
				if err := os.WriteFile(golden, []byte(got+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != strings.TrimSuffix(string(want), "\n") {
				t.Errorf("rendered:\n%s\n\nwant:\n%s", got, want)
			}
		})
	}
}

func TestParsePayloadForms(t *testing.T) {
	form := url.Values{"payload": {`{"text":"from a form"}`}}.Encode()
	p, err := ParsePayload("application/x-www-form-urlencoded", []byte(form))
	if err != nil || p.Text != "from a form" {
		t.Fatalf("form payload: %+v, %v", p, err)
	}
	// curl -d '{"text":...}' sends JSON labelled as a form.
	p, err = ParsePayload("application/x-www-form-urlencoded", []byte(`{"text":"curl"}`))
	if err != nil || p.Text != "curl" {
		t.Fatalf("curl -d payload: %+v, %v", p, err)
	}
	for name, c := range map[string]struct{ ct, body string }{
		"not json":        {"application/json", `text=hello`},
		"form no payload": {"application/x-www-form-urlencoded", `text=hello`},
		"form bad json":   {"application/x-www-form-urlencoded", `payload=%7Bnope`},
		"array":           {"application/json", `[1,2]`},
		"empty":           {"application/json", ``},
	} {
		if _, err := ParsePayload(c.ct, []byte(c.body)); !errors.Is(err, ErrInvalidPayload) {
			t.Errorf("%s: err %v, want invalid_payload", name, err)
		}
	}
	for _, body := range []string{`{}`, `{"text":"  "}`, `{"blocks":[{"type":"section"}]}`, `{"attachments":[{}]}`} {
		p, err := ParsePayload("application/json", []byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if _, err := Render(p); !errors.Is(err, ErrNoText) {
			t.Errorf("%s: err %v, want no_text", body, err)
		}
	}
}

func TestMrkdwn(t *testing.T) {
	for in, want := range map[string]string{
		"*bold* and _it_ and ~gone~":          "**bold** and _it_ and ~gone~",
		"*one* *two*":                         "**one** **two**",
		"**already** bold":                    "**already** bold",
		"2*3*4":                               "2*3*4",
		"<https://x.example|a [b] c>":         "[a (b) c](https://x.example)",
		"<https://x.example>":                 "https://x.example",
		"<!channel> <!here|here> <!everyone>": "@channel @here @everyone",
		"<!subteam^S1|@ops>":                  "@ops",
		"<@U123|alice> <#C1|general>":         "@alice #general",
		"a &lt;b&gt; &amp; c":                 "a <b> & c",
		"```*not bold*```":                    "```*not bold*```",
	} {
		if got := Mrkdwn(in); got != want {
			t.Errorf("Mrkdwn(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMatchTriggerAndParseCommand(t *testing.T) {
	words := []string{"deploy", "status?"}
	for text, want := range map[string]string{
		"deploy api": "deploy", "deploy": "deploy", "  status? now": "status?",
		"deployment": "", "please deploy": "", "Deploy api": "",
	} {
		got, ok := MatchTrigger(words, text)
		if got != want || ok != (want != "") {
			t.Errorf("MatchTrigger(%q) = %q, %v; want %q", text, got, ok, want)
		}
	}
	for text, want := range map[string][2]string{
		"/deploy api now": {"deploy", "api now"}, "/ME waves": {"me", "waves"}, "/leave": {"leave", ""},
	} {
		name, args, ok := ParseCommand(text)
		if !ok || name != want[0] || args != want[1] {
			t.Errorf("ParseCommand(%q) = %q, %q, %v", text, name, args, ok)
		}
	}
	for _, text := range []string{"hello", "//path", "/", " / x"} {
		if _, _, ok := ParseCommand(text); ok {
			t.Errorf("ParseCommand(%q) took it for a command", text)
		}
	}
}
