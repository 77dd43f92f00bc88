package httpapi

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"parley"
)

// TestSearch: the route passes q, cursor and limit through, pages with
// next_cursor, marks matches, and answers 400 for a blank or oversized q,
// a bad cursor or limit, and 404 for another workspace.
func TestSearch(t *testing.T) {
	tm, ch := newRoom(t)
	e := tm.e
	for _, text := range []string{"first deploy", "second deploy", "third Deployment"} {
		e.must(http.StatusCreated, "POST", "/channels/"+ch.ID+"/messages", tm.bob.Token, map[string]string{"text": text}, nil)
	}
	path := "/workspaces/" + tm.ws.ID + "/search"
	var page parley.SearchPage
	e.must(http.StatusOK, "GET", path+"?q=deploy&limit=2", tm.cat.Token, nil, &page)
	if len(page.Results) != 2 || page.Results[0].Message.Text != "third Deployment" ||
		page.Results[1].Message.Text != "second deploy" || page.NextCursor == "" {
		t.Fatalf("first page: %+v", page)
	}
	if want := "third " + parley.HighlightStart + "Deployment" + parley.HighlightEnd; page.Results[0].Highlight != want {
		t.Errorf("highlight %q, want %q", page.Results[0].Highlight, want)
	}
	var next parley.SearchPage
	e.must(http.StatusOK, "GET", path+"?q=deploy&limit=2&cursor="+url.QueryEscape(page.NextCursor), tm.cat.Token, nil, &next)
	if len(next.Results) != 1 || next.Results[0].Message.Text != "first deploy" || next.NextCursor != "" {
		t.Fatalf("second page: %+v", next)
	}
	// No match is an empty list, not null.
	r := e.must(http.StatusOK, "GET", path+"?q=kubernetes", tm.cat.Token, nil, nil)
	if !strings.Contains(string(r.Body), `"results":[]`) {
		t.Errorf("no match: %s", r.Body)
	}
	for _, q := range []string{"", "?q=", "?q=%20%20", "?q=" + strings.Repeat("x", 513), "?q=x&cursor=%21", "?q=x&limit=lots"} {
		e.must(http.StatusBadRequest, "GET", path+q, tm.cat.Token, nil, nil)
	}
	var other parley.Workspace
	e.must(http.StatusCreated, "POST", "/workspaces", tm.bob.Token, map[string]string{"name": "Other", "slug": "other-" + uniq()}, &other)
	e.must(http.StatusNotFound, "GET", "/workspaces/"+other.ID+"/search?q=deploy", tm.cat.Token, nil, nil)
}
