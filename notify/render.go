package notify

import (
	"bytes"
	"fmt"
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"
	"unicode/utf8"

	"parley"
)

// email is one rendered notification.
type email struct {
	Subject, Text, HTML string
	UnsubscribeURL      string
}

// view is what the templates see.
type view struct {
	Name           string
	Summary        string
	Groups         []group
	OpenURL        string
	SettingsURL    string
	UnsubscribeURL string
}

// group is the items of one conversation.
type group struct {
	Title string // "#general in Acme", "Ann (direct message) in Acme"
	Items []line
}

type line struct {
	Author, Time, Text string
}

// maxText bounds one message's text in an email.
const maxText = 500

// subject says what the email holds: "3 new mentions in Acme", "1 new
// direct message in Acme", "2 new mentions and 1 direct message in Acme
// and 1 other workspace".
func subject(items []parley.MissedItem) string {
	var mentions, dms int
	var workspaces []string
	seen := map[string]bool{}
	for _, it := range items {
		if it.Mention {
			mentions++
		} else {
			dms++
		}
		if !seen[it.WorkspaceID] {
			seen[it.WorkspaceID] = true
			workspaces = append(workspaces, it.WorkspaceName)
		}
	}
	plural := func(n int, one, many string) string {
		if n == 1 {
			return fmt.Sprintf("%d %s", n, one)
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	var what string
	switch {
	case mentions > 0 && dms > 0:
		what = plural(mentions, "new mention", "new mentions") + " and " + plural(dms, "direct message", "direct messages")
	case mentions > 0:
		what = plural(mentions, "new mention", "new mentions")
	default:
		what = plural(dms, "new direct message", "new direct messages")
	}
	where := ""
	if len(workspaces) > 0 {
		where = " in " + workspaces[0]
		if n := len(workspaces) - 1; n > 0 {
			where += " and " + plural(n, "other workspace", "other workspaces")
		}
	}
	return oneLine(what + where)
}

// oneLine drops line breaks (a workspace name cannot break the header).
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func clip(s string) string {
	if utf8.RuneCountInString(s) <= maxText {
		return s
	}
	r := []rune(s)
	return string(r[:maxText]) + "…"
}

// render builds the email for a recipient's items.
func render(r parley.NotifyRecipient, items []parley.MissedItem, baseURL, unsubURL string) (email, error) {
	v := view{Name: r.Name, Summary: subject(items), OpenURL: baseURL + "/",
		SettingsURL: baseURL + "/", UnsubscribeURL: unsubURL}
	idx := map[string]int{}
	for _, it := range items {
		g, ok := idx[it.ChannelID]
		if !ok {
			title := "#" + it.ChannelName
			if it.ChannelKind.IsDM() {
				title = "a direct message"
			}
			v.Groups = append(v.Groups, group{Title: title + " in " + it.WorkspaceName})
			g = len(v.Groups) - 1
			idx[it.ChannelID] = g
		}
		v.Groups[g].Items = append(v.Groups[g].Items, line{
			Author: it.AuthorName + " (@" + it.AuthorHandle + ")",
			Time:   it.CreatedAt.UTC().Format("Jan 2 15:04 MST"),
			Text:   clip(it.Text),
		})
	}
	var text, html bytes.Buffer
	if err := textTmpl.Execute(&text, v); err != nil {
		return email{}, fmt.Errorf("render text: %w", err)
	}
	if err := htmlTmpl.Execute(&html, v); err != nil {
		return email{}, fmt.Errorf("render html: %w", err)
	}
	return email{Subject: v.Summary, Text: text.String(), HTML: html.String(), UnsubscribeURL: unsubURL}, nil
}

var textTmpl = texttemplate.Must(texttemplate.New("text").Parse(`Hi {{.Name}},

You have {{.Summary}} that you have not read yet.
{{range .Groups}}
{{.Title}}
{{range .Items}}  {{.Author}}, {{.Time}}:
    {{.Text}}
{{end}}{{end}}
Open Parley: {{.OpenURL}}

You get these emails because email notifications are on in your Parley
preferences. Turn them off: {{.UnsubscribeURL}}
`))

// The HTML part: html/template escapes every value, message text included.
var htmlTmpl = htmltemplate.Must(htmltemplate.New("html").Parse(`<!doctype html>
<html><body style="font-family: sans-serif; color: #1d1c1d">
<p>Hi {{.Name}},</p>
<p>You have {{.Summary}} that you have not read yet.</p>
{{range .Groups}}<h3>{{.Title}}</h3>
{{range .Items}}<p><b>{{.Author}}</b> <span style="color: #616061">{{.Time}}</span><br>
<span style="white-space: pre-wrap">{{.Text}}</span></p>
{{end}}{{end}}<p><a href="{{.OpenURL}}">Open Parley</a></p>
<p style="color: #616061; font-size: 12px">You get these emails because email notifications are on in your
Parley preferences. <a href="{{.UnsubscribeURL}}">Unsubscribe</a></p>
</body></html>
`))
