package parley

import (
	"net/url"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// FuzzValidateBotProfile: whatever a webhook sends, an accepted profile is
// one a client can show safely (one clean line, a shortcode, an http(s)
// URL without credentials or characters that need escaping), and a second
// pass changes nothing.
func FuzzValidateBotProfile(f *testing.F) {
	for _, s := range [][3]string{
		{"Jenkins", ":robot_face:", "https://ci.example/j.png"},
		{"  Grafana ", "fire", "http://g.example:3000/i.png?x=1#y"},
		{"nul\x00", "", ""}, {"two\nlines", "", ""}, {"\u2028", "", ""}, {"\xff", "", ""},
		{"", "<script>", ""}, {"", "::", ""}, {"", ":a:b:", ""},
		{"", "", "javascript:alert(1)"}, {"", "", "data:image/png,x"}, {"", "", "//evil.example/x"},
		{"", "", "https://u:p@evil.example/"}, {"", "", "https://evil.example/\"><script>"},
		{"", "", "HTTPS://EVIL.EXAMPLE/X"}, {"", "", "https:evil.example"}, {"", "", "https://[::1]/x"},
		{strings.Repeat("é", 81), "", ""},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, name, emoji, icon string) {
		p, err := ValidateBotProfile(&BotProfile{Name: name, IconEmoji: emoji, IconURL: icon})
		if err != nil {
			if ErrorCode(err) != EINVALID {
				t.Fatalf("error %v is not EINVALID", err)
			}
			return
		}
		if p == nil {
			return
		}
		for _, s := range []string{p.Name, p.IconEmoji, p.IconURL} {
			if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
				t.Fatalf("accepted %q", s)
			}
		}
		if utf8.RuneCountInString(p.Name) > MaxBotProfileName || strings.IndexFunc(p.Name, unicode.IsControl) >= 0 {
			t.Fatalf("accepted name %q", p.Name)
		}
		if p.IconEmoji != "" && ValidateEmoji(p.IconEmoji) != nil {
			t.Fatalf("accepted emoji %q", p.IconEmoji)
		}
		if p.IconURL != "" {
			u, err := url.Parse(p.IconURL)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || strings.ContainsAny(p.IconURL, "\"<> \\") {
				t.Fatalf("accepted icon_url %q", p.IconURL)
			}
		}
		again, err := ValidateBotProfile(p)
		if err != nil || *again != *p {
			t.Fatalf("not idempotent: %+v → %+v, %v", p, again, err)
		}
	})
}
