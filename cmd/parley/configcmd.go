package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// `parley config get|set` reads and changes the live configuration of a
// running cluster through a node's admin listener (GET|PUT /config). The
// change is saved in the store and reaches every node (liveconfig).

func newConfigCmd(lookupEnv func(string) (string, bool)) *cobra.Command {
	admin := "127.0.0.1:9091"
	if v, ok := lookupEnv("PARLEY_ADMIN"); ok && v != "" {
		admin = v
	}
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Read or change the live configuration of a running Parley",
		Long: `Read or change the cluster-wide live configuration through a node's admin
listener. Changes take effect on every node within moments, without a restart.

Settings:
  collapsed_threads            true|false  replies count in their thread (default true)
  channel_mention_max_members  n           above n members, @channel/@here need an admin (0: no cap)
  gateway_compression          true|false  compress event frames (permessage-deflate) (default true)
  gateway_compression_min_bytes n          smaller event frames go uncompressed (default 256)
  gateway_fill_concurrency     n           catch-up reads of channel logs per node at once (0: --fill-concurrency)
  hot_enabled, hot_dry_run     true|false  hot-channel detection and hot delivery (docs/hot-channels.md)
  hot_on_rate, hot_off_rate    n           durable events/s at which a channel turns hot / cools (20, 10)
  hot_window_seconds, hot_ttl_seconds n    rate window (10) and the TTL of a hot mark shared by the bus (30)
  hot_batch_ms                 n           a hot channel's viewers are written once per n ms (100; 0: off)
  hot_typing_interval_ms       n           at most one typing event per n ms in a hot channel (1000; 0: all)
  view_enabled, view_dry_run   true|false  view-aware delivery: summaries for huge/hot channels out of focus
  view_min_members             n           channels with more members are passive out of focus (1000; 0: all)
  view_summary_seconds         n           at most one channel.summary per channel per session per n s (3)
  view_replay_max              n           on focus, up to n passed-over events are replayed (200)
  recent_enabled, recent_dry_run true|false  buffer hot channels' recent events for /events, /sync
  recent_events                n           events buffered per hot channel (default 1000)
  rate_<tier>_user, rate_<tier>_ip         API rate limits, tier message|write|create|search:
                                           "N/min", "N/min,burst=B", "off" or "default"
  rate_login_account_ip, rate_login_account, rate_login_ip, rate_signup_ip
                                           login and signup limits, same form
  store_guard_enabled, store_guard_dry_run true|false  bulkheads and breaker around store calls (default true, false)
  store_guard_writes|history|search|boot|reads n  store calls per purpose in flight per node (128, 64, 16, 64, 256)
  store_guard_wait_ms          n           longest wait for a slot of a full bulkhead (default 20)
  store_guard_error_rate_pct   n           breaker opens at this % of failed or slow calls... (default 50)
  store_guard_min_calls        n           ...over at least n calls in the window (default 20)
  store_guard_consecutive_failures n       or after n failed or slow calls in a row (default 20)
  store_guard_slow_call_ms     n           a call still running after n ms is a failure (default 500)
  store_guard_window_seconds   n           the breaker's rolling window (default 10)
  store_guard_open_seconds     n           an open breaker refuses calls this long, then probes (default 2)
                                           (docs/store-guard.md)
  join_limit_enabled, join_limit_dry_run  true|false  per-channel join limiter (default on, not dry run)
  join_rate_channel_node       n           joins/s one node accepts into one channel (default 20; 0: none)
  join_rate_channel_cluster    n           joins/s the cluster accepts into one channel, split over the
                                           live nodes (default 100; 0: none)
  join_burst                   n           joins a channel's bucket holds at once (default 20)
  slow_mode_enabled, slow_mode_dry_run    true|false  enforce channels' slow_mode_seconds and
                                           post_limit_per_minute (default on, not dry run)
  relay_grace_ms               n           a channel's events unacknowledged on the bus this long are
                                           published from the log by a relay (default 1000)
  relay_interval_ms            n           how often each node's relay looks (default 250)
                                           (docs/delivery.md)
  file_max_mb                  n           largest upload in MiB (default 1024; 0: none)
  file_workspace_quota_mb      n           bytes of files a workspace may hold, in MiB (default 10240;
                                           0: none) (docs/files.md)
  (docs/security.md lists every limit and its default; docs/join-limits.md the join
  limiter and slow mode)`,
	}
	cmd.PersistentFlags().StringVar(&admin, "admin", admin, "address of a node's admin listener ($PARLEY_ADMIN)")

	get := &cobra.Command{
		Use:   "get",
		Short: "Print the live configuration",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return adminCall(c.Context(), c.OutOrStdout(), http.MethodGet, admin, "/config", nil)
		},
	}
	var dry bool
	set := &cobra.Command{
		Use:   "set key=value…",
		Short: "Change live settings, e.g. parley config set collapsed_threads=false",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			patch := map[string]json.RawMessage{}
			for _, a := range args {
				k, v, ok := strings.Cut(a, "=")
				if !ok || k == "" || v == "" {
					return fmt.Errorf("%q: want key=value", a)
				}
				if !json.Valid([]byte(v)) { // a bare word becomes a string; the server says if that is wrong
					b, _ := json.Marshal(v)
					v = string(b)
				}
				patch[k] = json.RawMessage(v)
			}
			body, err := json.Marshal(patch)
			if err != nil {
				return err
			}
			path := "/config"
			if dry {
				path += "?dry_run=true"
			}
			return adminCall(c.Context(), c.OutOrStdout(), http.MethodPut, admin, path, body)
		},
	}
	set.Flags().BoolVar(&dry, "dry-run", false, "show what would change without changing it")
	cmd.AddCommand(get, set)
	return cmd
}

// adminCall sends one request to the admin listener and prints its JSON
// answer, or returns the server's error message.
func adminCall(ctx context.Context, out io.Writer, method, admin, path string, body []byte) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	url := admin
	if !strings.Contains(url, "://") {
		url = "http://" + url
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(url, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("admin listener at %s: %w", admin, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("admin listener at %s: %w", admin, err)
	}
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			return fmt.Errorf("%s (%d %s)", e.Error.Message, res.StatusCode, e.Error.Code)
		}
		return fmt.Errorf("admin listener at %s: %s", admin, res.Status)
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, data, "", "  ") != nil {
		pretty.Reset()
		pretty.Write(data)
	}
	_, err = fmt.Fprintln(out, strings.TrimSpace(pretty.String()))
	return err
}
