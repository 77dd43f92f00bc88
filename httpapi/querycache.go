package httpapi

import (
	"context"
	"net/http"
	"strings"

	"parley"
)

// Cache answers the directory queries from memory (querycache.Cache, the
// Flannel role). It authorises with the store's rules itself. Optional: when
// Config.Cache is nil the directory and /users/batch read the store, and the
// cache-only endpoints fall back to plain prefix searches over it.
type Cache interface {
	Switcher(ctx context.Context, actor, workspaceID, q string, limit int) (*parley.SwitcherResult, error)
	MentionSuggestions(ctx context.Context, actor, channelID, q string, limit int) ([]parley.MentionSuggestion, error)
	Directory(ctx context.Context, actor, workspaceID string, q parley.UserQuery) (*parley.UserPage, error)
	UsersBatch(ctx context.Context, actor string, ids []string) ([]parley.User, error)
	ChannelHeader(ctx context.Context, actor, channelID string) (*parley.ChannelHeader, error)
}

// directory pages the workspace directory: from the cache, else the store.
func (s *Server) directory(ctx context.Context, actor, workspaceID string, q parley.UserQuery) (*parley.UserPage, error) {
	if s.cache != nil {
		return s.cache.Directory(ctx, actor, workspaceID, q)
	}
	return s.store.ListWorkspaceUsers(ctx, actor, workspaceID, q)
}

// usersByID serves /users/batch: from the cache, else the store.
func (s *Server) usersByID(ctx context.Context, actor string, ids []string) ([]parley.User, error) {
	if s.cache != nil {
		return s.cache.UsersBatch(ctx, actor, ids)
	}
	return s.store.UsersBatch(ctx, actor, ids)
}

func (s *Server) switcher(w http.ResponseWriter, r *http.Request, c *caller) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	ws, q := r.PathValue("ws"), r.URL.Query().Get("q")
	var res *parley.SwitcherResult
	if s.cache != nil {
		res, err = s.cache.Switcher(r.Context(), c.UserID, ws, q, limit)
	} else {
		res, err = s.storeSwitcher(r.Context(), c.UserID, ws, q, limit)
	}
	if err != nil {
		return err
	}
	res.Channels, res.Users = nonNil(res.Channels), nonNil(res.Users)
	writeJSON(w, http.StatusOK, res)
	return nil
}

func (s *Server) mentionSuggestions(w http.ResponseWriter, r *http.Request, c *caller) error {
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	id, q := r.PathValue("id"), r.URL.Query().Get("q")
	var users []parley.MentionSuggestion
	if s.cache != nil {
		users, err = s.cache.MentionSuggestions(r.Context(), c.UserID, id, q, limit)
	} else {
		users, err = s.storeMentions(r.Context(), c.UserID, id, q, limit)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Users []parley.MentionSuggestion `json:"users"`
	}{nonNil(users)})
	return nil
}

func (s *Server) channelHeader(w http.ResponseWriter, r *http.Request, c *caller) error {
	var (
		h   *parley.ChannelHeader
		err error
	)
	if s.cache != nil {
		h, err = s.cache.ChannelHeader(r.Context(), c.UserID, r.PathValue("id"))
	} else {
		h, err = s.storeHeader(r.Context(), c.UserID, r.PathValue("id"))
	}
	if err != nil {
		return err
	}
	h.MembersPreview = nonNil(h.MembersPreview)
	writeJSON(w, http.StatusOK, h)
	return nil
}

// Without a cache the same endpoints answer from the store: prefix matches
// only, no ranking beyond the store's order. Tools and tests run this way.

func (s *Server) storeSwitcher(ctx context.Context, actor, ws, q string, limit int) (*parley.SwitcherResult, error) {
	q = strings.TrimSpace(q)
	term := strings.TrimSpace(strings.TrimLeft(q, "@#"))
	res := &parley.SwitcherResult{}
	if !strings.HasPrefix(q, "@") {
		page, err := s.store.ListChannels(ctx, actor, ws, parley.ChannelQuery{Q: term, Limit: limit})
		if err != nil {
			return nil, err
		}
		for _, ch := range page.Channels {
			if ch.ArchivedAt == nil {
				res.Channels = append(res.Channels, ch)
			}
		}
	}
	if !strings.HasPrefix(q, "#") {
		page, err := s.store.ListWorkspaceUsers(ctx, actor, ws, parley.UserQuery{Q: term, Limit: limit})
		if err != nil {
			return nil, err
		}
		for _, u := range page.Users {
			if !u.Deactivated {
				res.Users = append(res.Users, u)
			}
		}
	}
	return res, nil
}

func (s *Server) storeMentions(ctx context.Context, actor, channelID, q string, limit int) ([]parley.MentionSuggestion, error) {
	ch, err := s.store.GetChannel(ctx, actor, channelID)
	if err != nil {
		return nil, err
	}
	term := strings.TrimPrefix(strings.TrimSpace(q), "@")
	page, err := s.store.ListWorkspaceUsers(ctx, actor, ch.WorkspaceID, parley.UserQuery{Q: term, Limit: limit})
	if err != nil {
		return nil, err
	}
	var in, out []parley.MentionSuggestion
	for _, u := range page.Users {
		if u.Deactivated {
			continue
		}
		member, err := s.store.ChannelMember(ctx, u.ID, channelID)
		if err != nil {
			return nil, err
		}
		if member {
			in = append(in, parley.MentionSuggestion{User: u, InChannel: true})
		} else {
			out = append(out, parley.MentionSuggestion{User: u})
		}
	}
	return append(in, out...), nil
}

func (s *Server) storeHeader(ctx context.Context, actor, channelID string) (*parley.ChannelHeader, error) {
	ch, err := s.store.GetChannel(ctx, actor, channelID)
	if err != nil {
		return nil, err
	}
	page, err := s.store.ListMembers(ctx, actor, channelID, "", parley.MembersPreviewSize)
	if err != nil {
		return nil, err
	}
	h := &parley.ChannelHeader{Channel: *ch, MemberCount: ch.MemberCount, Topic: ch.Topic, Purpose: ch.Purpose}
	for _, m := range page.Members {
		if m.User != nil {
			h.MembersPreview = append(h.MembersPreview, *m.User)
		}
	}
	return h, nil
}
