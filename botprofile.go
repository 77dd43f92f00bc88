package parley

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of a BotProfile (Slack caps username at 80 characters too).
const (
	MaxBotProfileName = MaxNameLen
	MaxIconURLLen     = 2048 // bytes
)

// ValidateBotProfile checks and tidies the overrides of a bot message:
// the name is trimmed, at most MaxBotProfileName characters, with no
// control characters (no line breaks: it is one line beside a badge); the
// emoji loses Slack's colons (":ghost:" → "ghost") and must be a shortcode
// of the form reactions use; the URL must be an absolute http or https URL
// of at most MaxIconURLLen bytes, with a host, without credentials and without characters a URL must
// escape (spaces, quotes, angle brackets…). Any
// NUL or invalid UTF-8 is refused. A profile with nothing left is nil.
//
// Whether the shortcode names an emoji the client knows is the client's to
// decide (the emoji set lives in the web client); one it does not know
// shows as the bot's usual avatar.
func ValidateBotProfile(p *BotProfile) (*BotProfile, error) {
	if p == nil {
		return nil, nil
	}
	for _, f := range []struct{ name, v string }{{"username", p.Name}, {"icon_emoji", p.IconEmoji}, {"icon_url", p.IconURL}} {
		if err := CheckText(f.name, f.v); err != nil {
			return nil, err
		}
	}
	out := BotProfile{
		Name:      strings.TrimSpace(p.Name),
		IconEmoji: strings.Trim(strings.TrimSpace(p.IconEmoji), ":"),
		IconURL:   strings.TrimSpace(p.IconURL),
	}
	if utf8.RuneCountInString(out.Name) > MaxBotProfileName {
		return nil, invalid("username must be at most %d characters", MaxBotProfileName)
	}
	if strings.IndexFunc(out.Name, func(r rune) bool { return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' }) >= 0 {
		return nil, invalid("username must not contain control characters or line breaks")
	}
	if out.IconEmoji != "" {
		if err := ValidateEmoji(out.IconEmoji); err != nil {
			return nil, invalid("icon_emoji must be a shortcode such as :robot_face:")
		}
	}
	if out.IconURL != "" {
		if err := validateIconURL(out.IconURL); err != nil {
			return nil, err
		}
	}
	if out == (BotProfile{}) {
		return nil, nil
	}
	return &out, nil
}

func validateIconURL(s string) error {
	if len(s) > MaxIconURLLen {
		return invalid("icon_url must be at most %d bytes", MaxIconURLLen)
	}
	// Characters a URL never holds unescaped (RFC 3986) are refused
	// rather than escaped: an icon URL is passed on as it came.
	if strings.IndexFunc(s, func(r rune) bool {
		return r <= ' ' || r == 0x7f || unicode.IsSpace(r) || strings.ContainsRune("\"<>\\^`{|}", r)
	}) >= 0 {
		return invalid("icon_url must not contain spaces, control characters or any of \" < > \\ ^ ` { | }")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Opaque != "" {
		return invalid("icon_url must be an http or https URL")
	}
	if u.User != nil {
		return invalid("icon_url must not carry a user name or password")
	}
	return nil
}
