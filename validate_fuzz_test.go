package parley

import (
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

// Fuzz targets for the Go side's parsing of user text: mentions, emoji
// shortcodes and the validators every request field goes through. Their
// seeds (testdata/fuzz/<Name>/ and the f.Add calls) run under plain
// `go test`.

func FuzzMentions(f *testing.F) {
	for _, s := range []string{
		"hi @ann", "@ann.lee, @here and @channel", "mail a@b.c", "@a", "@" + strings.Repeat("x", 40),
		"@ann...", "@.. @-- @__", "x@ann @@bob", "é@ann", "\n@ann\t@bob", "@ANN", "@ann@bob",
		"`@ann` **@bob**", "@ann\x00@bob", "\xff@ann", "@ann\u0301",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		got := Mentions(text)
		seen := map[string]bool{}
		for _, h := range got {
			if err := ValidateHandle(h); err != nil {
				t.Fatalf("Mentions(%q) returned %q, not a handle: %v", text, h, err)
			}
			if strings.HasSuffix(h, ".") {
				t.Fatalf("Mentions(%q) returned %q with the sentence's full stop", text, h)
			}
			if seen[h] {
				t.Fatalf("Mentions(%q) returned %q twice", text, h)
			}
			seen[h] = true
			if !strings.Contains(text, "@"+h) {
				t.Fatalf("Mentions(%q) returned %q, which the text does not hold", text, h)
			}
		}
		// Mentions are found in the text as written: prepending a space
		// (a word boundary) never loses one.
		if again := Mentions(" " + text); len(again) < len(got) {
			t.Fatalf("Mentions(%q) = %q but with a leading space %q", text, got, again)
		}
	})
}

func FuzzValidateEmoji(f *testing.F) {
	for _, s := range []string{
		"thumbsup", "+1", "-1", "white_check_mark", "", ":tada:", "Thumbsup", "a b", "a/b", "..",
		"%2e", "a\x00", strings.Repeat("a", 64), strings.Repeat("a", 65), "👍", "ａ",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, e string) {
		if err := ValidateEmoji(e); err != nil {
			if ErrorCode(err) != EINVALID {
				t.Fatalf("ValidateEmoji(%q): %v, want a bad_request", e, err)
			}
			return
		}
		// An accepted shortcode travels as a URL path segment
		// (PUT /messages/{id}/reactions/{emoji}) and is stored as is.
		if n := len(e); n == 0 || n > MaxEmojiLen {
			t.Fatalf("ValidateEmoji(%q) accepted %d bytes", e, n)
		}
		if url.PathEscape(e) != e || e == "." || e == ".." {
			t.Fatalf("ValidateEmoji(%q) accepted a shortcode that is not a plain path segment", e)
		}
		if strings.ToLower(e) != e {
			t.Fatalf("ValidateEmoji(%q) accepted upper case: two spellings of one reaction", e)
		}
	})
}

// FuzzValidators feeds one string to every validator of user text: none
// panics, each refuses with a client error code, and what they accept holds
// the property they promise.
func FuzzValidators(f *testing.F) {
	for _, s := range []string{
		"Ann Lee", "ann.lee", "general", "team-1", "ann@example.com", "  ANN@Example.COM ", "a@b", "<a@b.c>",
		"Ann <ann@example.com>", "correct horse battery", "", " ", "\t\n", "\x00", "a\x00b", "\xff\xfe",
		strings.Repeat("é", 81), strings.Repeat("x", 40001), "🙂", "\u202e", "abcDEF123",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		clientErr := func(what string, err error) bool {
			t.Helper()
			switch ErrorCode(err) {
			case "":
				return false
			case EINVALID, ETOOLARGE:
				return true
			}
			t.Fatalf("%s(%q): %v, want a client error", what, s, err)
			return true
		}
		if !clientErr("ValidatePassword", ValidatePassword(s)) {
			if n := utf8.RuneCountInString(s); n < MinPasswordLen || n > MaxPasswordLen {
				t.Fatalf("ValidatePassword accepted %d characters", n)
			}
		}
		if e, err := NormalizeEmail(s); !clientErr("NormalizeEmail", err) {
			if len(e) > MaxEmailLen || !strings.Contains(e, "@") || strings.ToLower(e) != e {
				t.Fatalf("NormalizeEmail(%q) = %q", s, e)
			}
			if again, err := NormalizeEmail(e); err != nil || again != e {
				t.Fatalf("NormalizeEmail is not idempotent on %q: %q, %v", e, again, err)
			}
		}
		for what, v := range map[string]func(string) error{
			"ValidateHandle": ValidateHandle, "ValidateSlug": ValidateSlug,
			"ValidateChannelName": ValidateChannelName, "ValidateAvatarHash": ValidateAvatarHash,
		} {
			// These are patterns of ASCII: what passes is a plain
			// path segment and identifier.
			if !clientErr(what, v(s)) && url.PathEscape(s) != s {
				t.Fatalf("%s accepted %q, not a plain path segment", what, s)
			}
		}
		if !clientErr("ValidateName", ValidateName("name", s)) {
			if strings.TrimSpace(s) == "" || utf8.RuneCountInString(s) > MaxNameLen {
				t.Fatalf("ValidateName accepted %q", s)
			}
		}
		if !clientErr("ValidateText", ValidateText("topic", s, MaxTopicLen)) && utf8.RuneCountInString(s) > MaxTopicLen {
			t.Fatalf("ValidateText accepted %d characters", utf8.RuneCountInString(s))
		}
		if !clientErr("ValidateMessageText", ValidateMessageText(s)) {
			if !utf8.ValidString(s) || strings.TrimSpace(s) == "" || utf8.RuneCountInString(s) > MaxMessageLen {
				t.Fatalf("ValidateMessageText accepted %q", s)
			}
		}
		if !clientErr("ValidateClientMsgID", ValidateClientMsgID(s)) && len(s) > MaxClientMsgID {
			t.Fatalf("ValidateClientMsgID accepted %d bytes", len(s))
		}
	})
}
