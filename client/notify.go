package client

import (
	"context"
	"net/http"

	"parley"
)

// NotifySettings is the caller's email notification preference
// (docs/email.md) and what the server offers.
type NotifySettings struct {
	parley.NotifyPrefs
	// Intervals are the interval_seconds SetNotifyPrefs accepts.
	Intervals []int64 `json:"intervals"`
	// EmailEnabled says whether the server sends email at all.
	EmailEnabled bool `json:"email_enabled"`
}

// NotifyPrefs returns the caller's email notification preference.
func (c *Client) NotifyPrefs(ctx context.Context) (*NotifySettings, error) {
	var out NotifySettings
	if err := c.do(ctx, call{method: http.MethodGet, path: "/me/notifications"}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// SetNotifyPrefs sets the caller's email notification preference: mode
// parley.NotifyOff or parley.NotifyOn, interval_seconds one of
// parley.NotifyIntervals.
func (c *Client) SetNotifyPrefs(ctx context.Context, p parley.NotifyPrefs) (*NotifySettings, error) {
	var out NotifySettings
	if err := c.do(ctx, call{method: http.MethodPut, path: "/me/notifications", body: p, idempotent: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
