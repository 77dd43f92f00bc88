package parley

import (
	"net/mail"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Input limits from the client contract.
const (
	MinPasswordLen   = 8
	MaxPasswordLen   = 256
	MaxMessageLen    = 40000 // characters
	MaxNameLen       = 80    // display, workspace and channel names
	MaxTopicLen      = 250
	MaxPurposeLen    = 250
	MaxTitleLen      = 100
	MaxStatusTextLen = 100
	MaxEmojiLen      = 64
	MaxClientMsgID   = 64
	MaxGroupDMOthers = 8
	MaxBatchUsers    = 200
	MaxAddMembers    = 1000
	MaxEmailLen      = 254
)

var (
	handleRe  = regexp.MustCompile(`^[a-z0-9._-]{2,32}$`)
	slugRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,47}$`)
	chanRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,79}$`)
	emojiRe   = regexp.MustCompile(`^[a-z0-9_+\-]{1,64}$`)
	avatarRe  = regexp.MustCompile(`^[a-zA-Z0-9]{0,128}$`)
	mentionRe = regexp.MustCompile(`(?:^|[^a-zA-Z0-9._-])@([a-z0-9._-]{2,32})`)
)

func invalid(format string, args ...any) error { return Errorf(EINVALID, format, args...) }

// CheckText rejects a string no store can hold alike: PostgreSQL's text
// refuses NUL and invalid UTF-8 (an internal error) where SQLite would keep
// them. The HTTP API checks every string of a request this way before any
// handler runs; the validators below apply it too, for the other callers of
// a store (the gateway, seed and demo tools). field names the input.
func CheckText(field, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return invalid("%s must not contain NUL characters", field)
	}
	if !utf8.ValidString(s) {
		return invalid("%s must be valid UTF-8", field)
	}
	return nil
}

// ValidatePassword checks a new password's length.
func ValidatePassword(p string) error {
	if n := utf8.RuneCountInString(p); n < MinPasswordLen || n > MaxPasswordLen {
		return invalid("password must be %d to %d characters", MinPasswordLen, MaxPasswordLen)
	}
	return nil
}

// NormalizeEmail lower-cases and checks an email address.
func NormalizeEmail(e string) (string, error) {
	e = strings.ToLower(strings.TrimSpace(e))
	if len(e) > MaxEmailLen {
		return "", invalid("email is too long")
	}
	a, err := mail.ParseAddress(e)
	if err != nil || a.Address != e || !strings.Contains(e, "@") {
		return "", invalid("email is not a valid address")
	}
	return e, nil
}

// ValidateHandle checks a user handle: [a-z0-9._-]{2,32}.
func ValidateHandle(h string) error {
	if !handleRe.MatchString(h) {
		return invalid("handle must match [a-z0-9._-]{2,32}")
	}
	return nil
}

// ValidateSlug checks a workspace slug.
func ValidateSlug(s string) error {
	if !slugRe.MatchString(s) {
		return invalid("slug must be 2 to 48 characters of a-z, 0-9 and '-', starting with a letter or digit")
	}
	return nil
}

// ValidateName checks a display or workspace name: not blank, at most
// MaxNameLen characters.
func ValidateName(what, n string) error {
	if err := CheckText(what, n); err != nil {
		return err
	}
	if strings.TrimSpace(n) == "" {
		return invalid("%s is required", what)
	}
	if utf8.RuneCountInString(n) > MaxNameLen {
		return invalid("%s must be at most %d characters", what, MaxNameLen)
	}
	return nil
}

// ValidateChannelName checks a public or private channel's name.
func ValidateChannelName(n string) error {
	if !chanRe.MatchString(n) {
		return invalid("channel name must be 1 to 80 characters of a-z, 0-9, '.', '_' and '-'")
	}
	return nil
}

// ValidateText checks a bounded free-text field.
func ValidateText(what, s string, max int) error {
	if err := CheckText(what, s); err != nil {
		return err
	}
	if utf8.RuneCountInString(s) > max {
		return invalid("%s must be at most %d characters", what, max)
	}
	return nil
}

// ValidateMessageText checks a message's text: not blank, valid UTF-8, and at
// most MaxMessageLen characters (413 above).
func ValidateMessageText(s string) error {
	if err := CheckText("text", s); err != nil {
		return err
	}
	if strings.TrimSpace(s) == "" {
		return invalid("text is required")
	}
	if utf8.RuneCountInString(s) > MaxMessageLen {
		return Errorf(ETOOLARGE, "text must be at most %d characters", MaxMessageLen)
	}
	return nil
}

// ValidateEmoji checks a reaction shortcode such as "thumbsup".
func ValidateEmoji(e string) error {
	if !emojiRe.MatchString(e) {
		return invalid("emoji must be a shortcode of a-z, 0-9, '_', '+' and '-'")
	}
	return nil
}

// ValidateAvatarHash checks an avatar hash (alphanumeric).
func ValidateAvatarHash(h string) error {
	if !avatarRe.MatchString(h) {
		return invalid("avatar_hash must be alphanumeric, at most 128 characters")
	}
	return nil
}

// ValidateClientMsgID checks a client message id (optional).
func ValidateClientMsgID(id string) error {
	if err := CheckText("client_msg_id", id); err != nil {
		return err
	}
	if len(id) > MaxClientMsgID {
		return invalid("client_msg_id must be at most %d bytes", MaxClientMsgID)
	}
	return nil
}

// Mentions returns the distinct handles @mentioned in text, in order of first
// appearance, including the broadcast mentions (IsBroadcastMention).
func Mentions(text string) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range mentionRe.FindAllStringSubmatch(text, -1) {
		h := strings.TrimRight(m[1], ".")
		if len(h) < 2 || seen[h] {
			continue
		}
		seen[h] = true
		out = append(out, h)
	}
	return out
}
