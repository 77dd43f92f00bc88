package transfer

import (
	"strings"
	"unicode/utf8"

	"parley"
)

// Slack's message markup ("mrkdwn") to Parley's markdown
// (web/app/src/lib/markdown.ts). Slack writes references in angle
// brackets and escapes only &, < and >:
//
//	<@U123> <@U123|alice>      → @handle (the account's handle here)
//	<#C123> <#C123|general>    → #general
//	<!here> <!channel> <!everyone> → @here @channel @everyone
//	<!subteam^S1|@team>        → @team
//	<!date^1392734382^{date}|Feb 18> → Feb 18 (the fallback)
//	<https://x> <https://x|label> <mailto:a@b|a@b> → https://x, [label](https://x), [a@b](mailto:a@b)
//	*bold*                     → **bold** (Parley's *x* is italic)
//
// Code spans and blocks are copied as they are, but for the entities.

// SlackText converts one message's text. handles maps Slack user ids to
// Parley handles; channels maps Slack channel ids to names.
func SlackText(text string, handles, channels map[string]string) string {
	var b strings.Builder
	b.Grow(len(text))
	inCode, inBlock := false, false
	for i := 0; i < len(text); {
		switch {
		case strings.HasPrefix(text[i:], "```"):
			inBlock = !inBlock
			b.WriteString("```")
			i += 3
			continue
		case !inBlock && text[i] == '`':
			inCode = !inCode
			b.WriteByte('`')
			i++
			continue
		}
		if inCode || inBlock {
			n := entity(text[i:], &b)
			if n == 0 {
				b.WriteByte(text[i])
				n = 1
			}
			i += n
			continue
		}
		switch c := text[i]; c {
		case '<':
			end := strings.IndexByte(text[i+1:], '>')
			if end < 0 || strings.IndexByte(text[i+1:i+1+end], '\n') >= 0 {
				b.WriteByte(c)
				i++
				continue
			}
			b.WriteString(slackRef(text[i+1:i+1+end], handles, channels))
			i += end + 2
		case '&':
			n := entity(text[i:], &b)
			if n == 0 {
				b.WriteByte(c)
				n = 1
			}
			i += n
		case '*':
			// *bold*: a closing * on the same line, not next to spaces.
			end := strings.IndexByte(text[i+1:], '*')
			if end > 0 && !strings.ContainsAny(text[i+1:i+1+end], "\n`") &&
				text[i+1] != ' ' && text[i+end] != ' ' && (i == 0 || !isWordByte(text[i-1])) &&
				(i+end+2 >= len(text) || !isWordByte(text[i+end+2])) {
				b.WriteString("**")
				b.WriteString(SlackText(text[i+1:i+1+end], handles, channels))
				b.WriteString("**")
				i += end + 2
				continue
			}
			b.WriteByte(c)
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= utf8.RuneSelf
}

// entity writes the character of the entity s starts with and returns its
// length, or 0 when s starts with no entity Slack writes.
func entity(s string, b *strings.Builder) int {
	for _, e := range [...]struct{ name, ch string }{{"&amp;", "&"}, {"&lt;", "<"}, {"&gt;", ">"}} {
		if strings.HasPrefix(s, e.name) {
			b.WriteString(e.ch)
			return len(e.name)
		}
	}
	return 0
}

// unescape undoes Slack's three entities.
func unescape(s string) string {
	return strings.NewReplacer("&amp;", "&", "&lt;", "<", "&gt;", ">").Replace(s)
}

// slackRef converts the inside of one <…> reference.
func slackRef(ref string, handles, channels map[string]string) string {
	target, label, hasLabel := strings.Cut(ref, "|")
	label = unescape(label)
	switch {
	case strings.HasPrefix(target, "@"):
		if h := handles[target[1:]]; h != "" {
			return "@" + h
		}
		if hasLabel {
			return "@" + strings.TrimPrefix(label, "@")
		}
		return "@" + target[1:]
	case strings.HasPrefix(target, "#"):
		if n := channels[target[1:]]; n != "" {
			return "#" + n
		}
		if hasLabel {
			return "#" + label
		}
		return "#" + target[1:]
	case strings.HasPrefix(target, "!"):
		cmd := target[1:]
		switch {
		case cmd == parley.MentionHere || cmd == parley.MentionChannel || cmd == parley.MentionEveryone:
			return "@" + cmd
		case strings.HasPrefix(cmd, parley.MentionHere+"|"), strings.HasPrefix(cmd, parley.MentionChannel+"|"),
			strings.HasPrefix(cmd, parley.MentionEveryone+"|"):
			return "@" + cmd[:strings.IndexByte(cmd, '|')]
		case hasLabel:
			return label
		}
		return ""
	}
	url := unescape(target)
	if !hasLabel || label == url {
		return url
	}
	if addr, ok := strings.CutPrefix(url, "mailto:"); ok && label == addr {
		return addr
	}
	return "[" + strings.NewReplacer("[", "(", "]", ")").Replace(label) + "](" + url + ")"
}

// CleanText makes text something every store holds alike and Parley
// accepts: NUL characters dropped, invalid UTF-8 replaced, cut to
// parley.MaxMessageLen characters. It returns the reason when it changed
// anything, for the summary.
func CleanText(text string) (string, string) {
	reason := ""
	if strings.IndexByte(text, 0) >= 0 {
		text = strings.ReplaceAll(text, "\x00", "")
		reason = "messages with NUL characters (removed)"
	}
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
		reason = "messages with invalid UTF-8 (replaced)"
	}
	if utf8.RuneCountInString(text) > parley.MaxMessageLen {
		const note = "\n… (cut on import)"
		r := []rune(text)
		text = string(r[:parley.MaxMessageLen-utf8.RuneCountInString(note)]) + note
		reason = "messages longer than 40,000 characters (cut)"
	}
	return text, reason
}

// CleanEmoji turns a Slack reaction name into a Parley shortcode:
// skin tones dropped ("thumbsup::skin-tone-2" → "thumbsup"), lower case.
// ok is false for names Parley does not take (some custom emoji).
func CleanEmoji(name string) (string, bool) {
	name, _, _ = strings.Cut(name, "::")
	name = strings.ToLower(name)
	return name, parley.ValidateEmoji(name) == nil
}
