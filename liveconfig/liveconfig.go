// Package liveconfig keeps the cluster-wide live configuration
// (ARCHITECTURE §7): settings and feature flags that operators change at
// run time, without a restart, and that every node sees within moments.
//
// The store's settings row is the source of truth. A change is saved there
// first, then a notice goes out on the bus; every node (the writer
// included) reloads from the store when it hears one, and also every
// Refresh period, so a notice lost on the bus delays a change but never
// loses it. Readers call LiveConfig, an atomic load, on every request that
// depends on it.
package liveconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"parley"
)

// DefaultRefresh is how often a node reloads the configuration even when
// no notice came.
const DefaultRefresh = 30 * time.Second

// Options configure a Manager; the zero value of each field is a default.
type Options struct {
	Logger     *slog.Logger          // defaults to slog.Default()
	Registerer prometheus.Registerer // nil: no metrics
	Refresh    time.Duration         // DefaultRefresh when zero; negative: never
}

// Manager holds the current live configuration of this node.
type Manager struct {
	cur     atomic.Pointer[parley.LiveConfig]
	log     *slog.Logger
	refresh time.Duration
	metrics *metrics

	// Set by Start.
	store  parley.SettingsService
	bus    parley.RawBus
	unsub  func() error
	reload chan struct{} // a notice arrived: reload soon (1-buffered)
	stop   chan struct{}
	done   sync.WaitGroup

	// mu serialises Update's read-modify-write on this node.
	mu sync.Mutex
}

var _ parley.LiveConfigSource = (*Manager)(nil)

// New returns a manager that answers the defaults until Start loads the
// stored configuration. It exists before the store so that the store can
// be given it as its LiveConfigSource.
func New(o Options) *Manager {
	m := &Manager{log: o.Logger, refresh: o.Refresh, metrics: newMetrics(o.Registerer)}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.refresh == 0 {
		m.refresh = DefaultRefresh
	}
	c := parley.DefaultLiveConfig()
	m.set(c)
	return m
}

// LiveConfig returns the current configuration (an atomic load).
func (m *Manager) LiveConfig() parley.LiveConfig { return *m.cur.Load() }

// Start loads the stored configuration, then follows changes: notices on
// bus (topic parley.ConfigChangedTopic; a notice carries no configuration,
// only the reason to reload it) and the periodic refresh. Stop ends that.
func (m *Manager) Start(ctx context.Context, store parley.SettingsService, bus parley.RawBus) error {
	m.store, m.bus = store, bus
	m.reload = make(chan struct{}, 1)
	m.stop = make(chan struct{})
	// Subscribe before loading: a change saved between the two is then
	// either in the load or announced by a notice that reloads it.
	unsub, err := bus.SubscribeRaw(parley.ConfigChangedTopic, func([]byte) {
		select {
		case m.reload <- struct{}{}:
		default: // a reload is already pending; it will read the latest
		}
	})
	if err != nil {
		m.stop = nil // not started: Stop does nothing
		return fmt.Errorf("live config: subscribe: %w", err)
	}
	if err := m.load(ctx); err != nil {
		unsub()
		m.stop = nil
		return err
	}
	m.unsub = unsub
	m.done.Add(1)
	go m.follow()
	return nil
}

// Stop ends following changes; LiveConfig keeps answering the last value.
// It does nothing when Start was not called or failed.
func (m *Manager) Stop() {
	if m.stop == nil {
		return
	}
	if m.unsub != nil {
		m.unsub()
	}
	close(m.stop)
	m.done.Wait()
	m.stop = nil
}

// follow reloads on every notice and every refresh period.
func (m *Manager) follow() {
	defer m.done.Done()
	var tick <-chan time.Time
	if m.refresh > 0 {
		t := time.NewTicker(m.refresh)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-m.stop:
			return
		case <-m.reload:
		case <-tick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := m.load(ctx); err != nil {
			m.log.Warn("live config: reload failed; keeping the current one", "err", err)
		}
		cancel()
	}
}

// load reads the stored configuration and makes it current.
func (m *Manager) load(ctx context.Context) error {
	c, err := m.store.LoadLiveConfig(ctx)
	if err != nil {
		m.metrics.reloadErrors.Inc()
		return fmt.Errorf("live config: %w", err)
	}
	if old := m.LiveConfig(); old != c {
		m.log.Info("live config changed", "old", old, "new", c)
	}
	m.set(c)
	return nil
}

func (m *Manager) set(c parley.LiveConfig) {
	m.cur.Store(&c)
	m.metrics.observe(c)
}

// Patch holds the fields of a change; nil fields are left as they are.
type Patch struct {
	CollapsedThreads           *bool `json:"collapsed_threads,omitempty"`
	ChannelMentionMaxMembers   *int  `json:"channel_mention_max_members,omitempty"`
	GatewayCompression         *bool `json:"gateway_compression,omitempty"`
	GatewayCompressionMinBytes *int  `json:"gateway_compression_min_bytes,omitempty"`
	GatewayFillConcurrency     *int  `json:"gateway_fill_concurrency,omitempty"`
	RatePatch
	HotPatch
	RecentPatch
	StoreGuardPatch
	JoinPatch
	RelayPatch
	FilePatch
}

// RatePatch holds the rate limits of a change: each a text such as
// "60/min,burst=30", "off", or "default" (the node's own setting); a text
// that is none of these is refused while decoding (EINVALID).
type RatePatch struct {
	RateMessageUser    *parley.Rate `json:"rate_message_user,omitempty"`
	RateMessageIP      *parley.Rate `json:"rate_message_ip,omitempty"`
	RateWriteUser      *parley.Rate `json:"rate_write_user,omitempty"`
	RateWriteIP        *parley.Rate `json:"rate_write_ip,omitempty"`
	RateCreateUser     *parley.Rate `json:"rate_create_user,omitempty"`
	RateCreateIP       *parley.Rate `json:"rate_create_ip,omitempty"`
	RateSearchUser     *parley.Rate `json:"rate_search_user,omitempty"`
	RateSearchIP       *parley.Rate `json:"rate_search_ip,omitempty"`
	RateLoginAccountIP *parley.Rate `json:"rate_login_account_ip,omitempty"`
	RateLoginAccount   *parley.Rate `json:"rate_login_account,omitempty"`
	RateLoginIP        *parley.Rate `json:"rate_login_ip,omitempty"`
	RateSignupIP       *parley.Rate `json:"rate_signup_ip,omitempty"`
}

// apply sets r's fields that p gives.
func (p RatePatch) apply(r *parley.LiveRates) {
	for _, f := range []struct {
		from *parley.Rate
		to   *parley.Rate
	}{
		{p.RateMessageUser, &r.MessageUser}, {p.RateMessageIP, &r.MessageIP},
		{p.RateWriteUser, &r.WriteUser}, {p.RateWriteIP, &r.WriteIP},
		{p.RateCreateUser, &r.CreateUser}, {p.RateCreateIP, &r.CreateIP},
		{p.RateSearchUser, &r.SearchUser}, {p.RateSearchIP, &r.SearchIP},
		{p.RateLoginAccountIP, &r.LoginAccountIP}, {p.RateLoginAccount, &r.LoginAccount},
		{p.RateLoginIP, &r.LoginIP}, {p.RateSignupIP, &r.SignupIP},
	} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
}

// Apply returns c with p's fields set, or EINVALID for a value out of
// range.
func (p Patch) Apply(c parley.LiveConfig) (parley.LiveConfig, error) {
	if p.CollapsedThreads != nil {
		c.CollapsedThreads = *p.CollapsedThreads
	}
	if p.ChannelMentionMaxMembers != nil {
		if *p.ChannelMentionMaxMembers < 0 {
			return c, parley.Errorf(parley.EINVALID, "channel_mention_max_members must be 0 (no cap) or more")
		}
		c.ChannelMentionMaxMembers = *p.ChannelMentionMaxMembers
	}
	if p.GatewayCompression != nil {
		c.GatewayCompression = *p.GatewayCompression
	}
	if p.GatewayCompressionMinBytes != nil {
		if n := *p.GatewayCompressionMinBytes; n < 0 || n > parley.MaxGatewayCompressionMinBytes {
			return c, parley.Errorf(parley.EINVALID, "gateway_compression_min_bytes must be 0 to %d", parley.MaxGatewayCompressionMinBytes)
		}
		c.GatewayCompressionMinBytes = *p.GatewayCompressionMinBytes
	}
	if p.GatewayFillConcurrency != nil {
		if n := *p.GatewayFillConcurrency; n < 0 || n > parley.MaxGatewayFillConcurrency {
			return c, parley.Errorf(parley.EINVALID, "gateway_fill_concurrency must be 0 (the node's --fill-concurrency) to %d", parley.MaxGatewayFillConcurrency)
		}
		c.GatewayFillConcurrency = *p.GatewayFillConcurrency
	}
	p.RatePatch.apply(&c.LiveRates)
	if err := p.HotPatch.apply(&c); err != nil {
		return c, err
	}
	if err := p.RecentPatch.apply(&c); err != nil {
		return c, err
	}
	if err := p.StoreGuardPatch.apply(&c); err != nil {
		return c, err
	}
	if err := p.JoinPatch.apply(&c); err != nil {
		return c, err
	}
	if err := p.RelayPatch.apply(&c); err != nil {
		return c, err
	}
	if err := p.FilePatch.apply(&c); err != nil {
		return c, err
	}
	return c, nil
}

// Change is the outcome of Update: the configuration before and after, and
// the names of the fields that differ.
type Change struct {
	Old     parley.LiveConfig `json:"old"`
	New     parley.LiveConfig `json:"new"`
	Changed []string          `json:"changed"`
	DryRun  bool              `json:"dry_run"`
}

// Update applies p to the stored configuration (read fresh from the store,
// so a change made on another node is not undone), saves it and tells every
// node. With dryRun it only reports what would change.
func (m *Manager) Update(ctx context.Context, p Patch, dryRun bool) (*Change, error) {
	if m.store == nil {
		return nil, parley.Errorf(parley.EUNAVAILABLE, "live config is not started")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old, err := m.store.LoadLiveConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("live config: %w", err)
	}
	c, err := p.Apply(old)
	if err != nil {
		return nil, err
	}
	ch := &Change{Old: old, New: c, Changed: diff(old, c), DryRun: dryRun}
	if dryRun || len(ch.Changed) == 0 {
		return ch, nil
	}
	if err := m.store.SaveLiveConfig(ctx, c); err != nil {
		return nil, fmt.Errorf("live config: %w", err)
	}
	m.set(c) // this node at once; the others on the notice
	m.metrics.updates.Inc()
	if err := m.bus.PublishRaw(parley.ConfigChangedTopic, []byte(`{}`)); err != nil {
		// Saved: the other nodes pick it up on their next refresh.
		m.log.Warn("live config: change notice not sent; other nodes will see it on refresh",
			"refresh", m.refresh, "err", err)
	}
	m.log.Info("live config updated", "changed", ch.Changed, "new", c)
	return ch, nil
}

// diff names the fields that differ between a and b, by their JSON names.
func diff(a, b parley.LiveConfig) []string {
	var am, bm map[string]any
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	json.Unmarshal(ja, &am)
	json.Unmarshal(jb, &bm)
	changed := []string{}
	for k, v := range bm {
		if fmt.Sprint(am[k]) != fmt.Sprint(v) {
			changed = append(changed, k)
		}
	}
	sort.Strings(changed)
	return changed
}
