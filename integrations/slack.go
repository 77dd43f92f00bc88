// Package integrations speaks the formats of the tools teams already have:
// Slack's incoming-webhook payloads (text, blocks, attachments) rendered to
// Parley markdown, the signed requests of slash commands and outgoing
// webhooks (HMAC-SHA256 over "v0:{timestamp}:{body}", as Slack signs), and
// the HTTP calls that carry them, with a short timeout and errors a person
// can read.
//
// It holds no state and never touches the store or the bus: the HTTP API
// (package httpapi) decides who may do what and posts the results.
package integrations

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"regexp"
	"strings"

	"parley"
)

// Payload is the body of a Slack incoming-webhook request (and of a slash
// command's answer, which adds ResponseType). Unknown fields are ignored.
type Payload struct {
	Text         string       `json:"text"`
	Username     string       `json:"username"`
	IconEmoji    string       `json:"icon_emoji"`
	IconURL      string       `json:"icon_url"`
	Channel      string       `json:"channel"`
	Mrkdwn       *bool        `json:"mrkdwn"`
	Blocks       []Block      `json:"blocks"`
	Attachments  []Attachment `json:"attachments"`
	ResponseType string       `json:"response_type"`
	ThreadTS     string       `json:"thread_ts"`
}

// Profile is the payload's per-message name and icon (Slack's username,
// icon_emoji, icon_url), not yet validated; nil when it sets none.
func (p *Payload) Profile() *parley.BotProfile {
	if p.Username == "" && p.IconEmoji == "" && p.IconURL == "" {
		return nil
	}
	return &parley.BotProfile{Name: p.Username, IconEmoji: p.IconEmoji, IconURL: p.IconURL}
}

// Block is one Slack layout block. The kinds Parley renders: section,
// context, header, divider, rich_text is not, image as a link.
type Block struct {
	Type     string       `json:"type"`
	Text     *TextObject  `json:"text"`
	Fields   []TextObject `json:"fields"`
	Elements []Element    `json:"elements"`
	ImageURL string       `json:"image_url"`
	AltText  string       `json:"alt_text"`
	Title    *TextObject  `json:"title"`
}

// TextObject is Slack's {"type": "mrkdwn"|"plain_text", "text": ...}.
type TextObject struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// Element is an element of a context block: a text object or an image.
type Element struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	AltText  string `json:"alt_text"`
	ImageURL string `json:"image_url"`
}

// Attachment is Slack's legacy attachment: still what Alertmanager,
// Grafana and many CI tools send.
type Attachment struct {
	Fallback   string       `json:"fallback"`
	Color      string       `json:"color"`
	Pretext    string       `json:"pretext"`
	AuthorName string       `json:"author_name"`
	AuthorLink string       `json:"author_link"`
	Title      string       `json:"title"`
	TitleLink  string       `json:"title_link"`
	Text       string       `json:"text"`
	Fields     []Field      `json:"fields"`
	ImageURL   string       `json:"image_url"`
	Footer     string       `json:"footer"`
	Blocks     []Block      `json:"blocks"`
	MrkdwnIn   []string     `json:"mrkdwn_in"`
	Actions    []jsonAction `json:"actions"`
}

// Field is an attachment field.
type Field struct {
	Title string `json:"title"`
	Value string `json:"value"`
	Short bool   `json:"short"`
}

// jsonAction is a legacy attachment button; rendered as a link.
type jsonAction struct {
	Text string `json:"text"`
	URL  string `json:"url"`
}

// Errors of ParsePayload and Render, named after Slack's answers.
var (
	// ErrInvalidPayload: the body is not a payload (Slack: invalid_payload).
	ErrInvalidPayload = errors.New("invalid_payload")
	// ErrNoText: the payload renders to nothing (Slack: no_text).
	ErrNoText = errors.New("no_text")
)

// ParsePayload decodes a webhook body: JSON (application/json, or any
// type whose body is a JSON object, as curl -d sends it) or a form whose
// payload field holds the JSON (application/x-www-form-urlencoded).
func ParsePayload(contentType string, body []byte) (*Payload, error) {
	mt, _, _ := mime.ParseMediaType(contentType)
	trimmed := strings.TrimSpace(string(body))
	if mt == "application/x-www-form-urlencoded" && !strings.HasPrefix(trimmed, "{") {
		form, err := url.ParseQuery(trimmed)
		if err != nil {
			return nil, fmt.Errorf("%w: bad form: %v", ErrInvalidPayload, err)
		}
		trimmed = strings.TrimSpace(form.Get("payload"))
		if trimmed == "" {
			return nil, fmt.Errorf("%w: the form has no payload field", ErrInvalidPayload)
		}
	}
	var p Payload
	if err := json.Unmarshal([]byte(trimmed), &p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	return &p, nil
}

// Render turns a payload into one Parley markdown message: the text (or,
// when there are blocks, the blocks instead), then each attachment as quoted lines. ErrNoText when
// nothing is left.
func Render(p *Payload) (string, error) {
	var parts []string
	// With blocks, Slack shows them and keeps text for notifications
	// only: rendering both would say everything twice.
	if t := strings.TrimSpace(Mrkdwn(p.Text)); t != "" && len(p.Blocks) == 0 {
		parts = append(parts, t)
	}
	if b := renderBlocks(p.Blocks); b != "" {
		parts = append(parts, b)
	}
	for _, a := range p.Attachments {
		if s := renderAttachment(a); s != "" {
			parts = append(parts, s)
		}
	}
	out := strings.TrimSpace(strings.Join(parts, "\n"))
	if out == "" {
		return "", ErrNoText
	}
	return out, nil
}

func renderText(t *TextObject) string {
	if t == nil {
		return ""
	}
	if t.Type == "plain_text" {
		return t.Text
	}
	return Mrkdwn(t.Text)
}

func renderBlocks(blocks []Block) string {
	var lines []string
	for _, b := range blocks {
		switch b.Type {
		case "header":
			if t := strings.TrimSpace(renderText(b.Text)); t != "" {
				lines = append(lines, "### "+oneLine(t))
			}
		case "section":
			if t := strings.TrimSpace(renderText(b.Text)); t != "" {
				lines = append(lines, t)
			}
			for _, f := range b.Fields {
				if t := strings.TrimSpace(renderText(&f)); t != "" {
					lines = append(lines, "- "+strings.ReplaceAll(t, "\n", " "))
				}
			}
		case "context":
			var bits []string
			for _, e := range b.Elements {
				switch e.Type {
				case "mrkdwn":
					bits = append(bits, Mrkdwn(e.Text))
				case "plain_text":
					bits = append(bits, e.Text)
				case "image":
					if e.AltText != "" {
						bits = append(bits, e.AltText)
					}
				}
			}
			if len(bits) > 0 {
				lines = append(lines, "_"+oneLine(strings.Join(bits, " · "))+"_")
			}
		case "divider":
			lines = append(lines, "───")
		case "image":
			if b.ImageURL != "" {
				label := b.AltText
				if b.Title != nil && b.Title.Text != "" {
					label = b.Title.Text
				}
				if label == "" {
					label = "image"
				}
				lines = append(lines, link(label, b.ImageURL))
			}
		}
	}
	return strings.Join(lines, "\n")
}

// renderAttachment renders a legacy attachment as quoted lines: the
// pretext above, then a colour mark, title (linked), text and fields.
func renderAttachment(a Attachment) string {
	var out []string
	if t := strings.TrimSpace(Mrkdwn(a.Pretext)); t != "" {
		out = append(out, t)
	}
	var q []string
	if a.AuthorName != "" {
		q = append(q, "_"+oneLine(a.AuthorName)+"_")
	}
	title := oneLine(Mrkdwn(a.Title))
	if title != "" {
		if a.TitleLink != "" {
			title = link(title, a.TitleLink)
		}
		q = append(q, colorMark(a.Color)+"**"+title+"**")
	}
	if t := strings.TrimSpace(Mrkdwn(a.Text)); t != "" {
		if title == "" && a.Color != "" {
			t = colorMark(a.Color) + t
		}
		q = append(q, strings.Split(t, "\n")...)
	} else if title == "" && len(a.Blocks) == 0 && len(a.Fields) == 0 && a.Fallback != "" {
		q = append(q, oneLine(a.Fallback))
	}
	for _, f := range a.Fields {
		v := strings.ReplaceAll(strings.TrimSpace(Mrkdwn(f.Value)), "\n", " ")
		switch {
		case f.Title != "" && v != "":
			q = append(q, "**"+oneLine(f.Title)+":** "+v)
		case f.Title != "":
			q = append(q, "**"+oneLine(f.Title)+"**")
		case v != "":
			q = append(q, v)
		}
	}
	if b := renderBlocks(a.Blocks); b != "" {
		q = append(q, strings.Split(b, "\n")...)
	}
	if a.ImageURL != "" {
		q = append(q, "[image]("+a.ImageURL+")")
	}
	for _, ac := range a.Actions {
		if ac.URL != "" && ac.Text != "" {
			q = append(q, link(oneLine(ac.Text), ac.URL))
		}
	}
	if a.Footer != "" {
		q = append(q, "_"+oneLine(Mrkdwn(a.Footer))+"_")
	}
	for _, l := range q {
		out = append(out, "> "+l)
	}
	return strings.Join(out, "\n")
}

// colorMark turns an attachment colour into an emoji a reader can scan
// for: Slack's named colours and the reds, yellows and greens that
// monitoring tools use.
func colorMark(c string) string {
	c = strings.ToLower(strings.TrimPrefix(strings.TrimSpace(c), "#"))
	switch c {
	case "":
		return ""
	case "danger":
		return "🔴 "
	case "warning":
		return "🟡 "
	case "good":
		return "🟢 "
	}
	if len(c) != 6 {
		return ""
	}
	var r, g, b int
	if _, err := fmt.Sscanf(c, "%02x%02x%02x", &r, &g, &b); err != nil {
		return ""
	}
	switch {
	case r > 180 && g < 120:
		return "🔴 "
	case r > 180 && g > 140 && b < 120:
		return "🟡 "
	case g > 120 && r < 150:
		return "🟢 "
	}
	return "🔵 "
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// link writes a markdown link; brackets in the label become parentheses
// so that "[FIRING:1] …" cannot end the label early.
func link(label, href string) string {
	label = strings.NewReplacer("[", "(", "]", ")").Replace(label)
	return "[" + label + "](" + href + ")"
}

var (
	slackLink = regexp.MustCompile(`<([^<>|\s]+)(?:\|([^<>]*))?>`)
	// *bold* in Slack is **bold** in Parley (where *x* is italic).
	slackBold = regexp.MustCompile(`(^|[\s(\[{>_~])\*([^*\n]+?)\*($|[\s)\]}.,;:!?_~])`)
)

// Mrkdwn converts Slack mrkdwn to Parley markdown: *bold* → **bold**,
// <url|label> → [label](url), <!here> → @here, <#C1|name> → #name, and
// Slack's &amp; &lt; &gt; escapes back to characters. _italic_, ~strike~,
// `code`, ```blocks``` and > quotes are the same in both.
func Mrkdwn(s string) string {
	if s == "" {
		return ""
	}
	s = slackLink.ReplaceAllStringFunc(s, func(m string) string {
		sub := slackLink.FindStringSubmatch(m)
		target, label := sub[1], sub[2]
		switch {
		case strings.HasPrefix(target, "!"):
			name, _, _ := strings.Cut(target[1:], "^")
			if parley.IsBroadcastMention(name) {
				return "@" + name
			}
			if label != "" {
				return label
			}
			return ""
		case strings.HasPrefix(target, "@"):
			if label != "" {
				return "@" + strings.TrimPrefix(label, "@")
			}
			return target
		case strings.HasPrefix(target, "#"):
			if label != "" {
				return "#" + label
			}
			return target
		}
		if label == "" || label == target {
			return target
		}
		return link(label, target)
	})
	// Run twice: adjacent bold spans share the space between them.
	for range 2 {
		s = slackBold.ReplaceAllString(s, "$1**$2**$3")
	}
	return strings.NewReplacer("&lt;", "<", "&gt;", ">", "&amp;", "&").Replace(s)
}
