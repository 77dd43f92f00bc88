package httpapi

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"parley"
	"parley/auth"
	"parley/integrations"
	"parley/internal/edge"
)

// Integrations: bot users and their scoped tokens, incoming webhooks
// (Slack's payloads), slash commands and outgoing webhooks
// (docs/integrations.md). The store authorises who manages what; this file
// checks token scopes, the webhook secrets and response_url tokens, and
// makes the signed calls.

// DefaultWebhookRate limits each incoming webhook: Slack allows about one
// message a second, with short bursts.
var DefaultWebhookRate = parley.MustRate("60/min,burst=30")

// Limits of the integration calls.
const (
	// responseTTL and responseUses bound a response_url (Slack: 30
	// minutes, five answers).
	responseTTL  = 30 * time.Minute
	responseUses = 5
	// outgoingTTL is how long a node keeps a workspace's outgoing
	// webhooks before reading them again: a webhook made on another node
	// starts firing here within this.
	outgoingTTL = 15 * time.Second
	// maxOutgoingCalls bounds the outgoing-webhook calls in flight on a
	// node; a message that finds them all busy fires nothing (logged).
	maxOutgoingCalls = 64
	auditTimeout     = 5 * time.Second
)

// integ is the integrations' share of a Server.
type integ struct {
	store parley.IntegrationStore // nil: integrations are off (503)
	// recorder queues audit entries (package auditlog); nil: each is
	// written by the request, after its answer.
	recorder AuditRecorder
	srv      *Server
	log      *slog.Logger
	caller   *integrations.Caller
	hookLim  *edge.Limiter // per incoming webhook

	outgoingSem chan struct{}
	mu          sync.Mutex
	outgoing    map[string]outgoingEntry // guarded by mu: workspace → its outgoing webhooks
	wg          sync.WaitGroup           // outgoing calls in flight (tests wait on it)
}

type outgoingEntry struct {
	hooks []parley.Integration
	at    time.Time
}

func newInteg(cfg Config, s *Server) *integ {
	rate := cfg.WebhookRate.Or(DefaultWebhookRate)
	return &integ{
		store:       cfg.Integrations,
		recorder:    cfg.Audit,
		srv:         s,
		log:         s.log,
		caller:      &integrations.Caller{Client: cfg.CommandClient, Timeout: cfg.CommandTimeout, Now: s.now},
		hookLim:     edge.NewLimiter(rate, 100_000),
		outgoingSem: make(chan struct{}, maxOutgoingCalls),
		outgoing:    map[string]outgoingEntry{},
	}
}

// checkScope refuses a bot token a route it has no scope for: 403 that
// names the scope, so that the bot's author knows what to ask for.
func checkScope(rt route, c *caller) error {
	if !c.bot() {
		return nil
	}
	if rt.Scope == "" {
		return parley.Errorf(parley.EFORBIDDEN, "bot tokens may not call %s %s", rt.Method, strings.TrimPrefix(rt.Pattern, Prefix))
	}
	for _, sc := range c.Scopes {
		if sc == rt.Scope {
			return nil
		}
	}
	return parley.Errorf(parley.EFORBIDDEN, "this token lacks the %s scope", rt.Scope)
}

// AuditRecorder takes bot audit entries to write later; *auditlog.Writer
// is one.
type AuditRecorder interface {
	Record(ctx context.Context, e parley.AuditEntry)
}

// auditCall records a bot token's write after it was answered.
func (in *integ) auditCall(r *http.Request, c *caller, rt route, sw *statusWriter) {
	if in.store == nil {
		return
	}
	in.audit(r.Context(), c.UserID, rt.Method+" "+strings.TrimPrefix(rt.Pattern, Prefix), r.URL.Path, sw.status())
}

// audit writes one entry for botID's workspace; a failure is logged, never
// the caller's.
func (in *integ) audit(ctx context.Context, botID, action, target string, status int) {
	if in.recorder != nil {
		in.recorder.Record(ctx, parley.AuditEntry{BotID: botID, Action: action, Target: target, Status: status})
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	ws, err := in.store.BotWorkspace(ctx, botID)
	if err == nil {
		err = in.store.Audit(ctx, ws, parley.AuditEntry{BotID: botID, Action: action, Target: target, Status: status})
	}
	if err != nil {
		in.log.Warn("bot audit failed", "bot_id", botID, "action", action, "err", err)
	}
}

// need returns the integration store, or 503 when integrations are off.
func (s *Server) needInteg() (parley.IntegrationStore, error) {
	if s.integ.store == nil {
		return nil, parley.Errorf(parley.EUNAVAILABLE, "integrations are not enabled on this server")
	}
	return s.integ.store, nil
}

// --- bots and tokens ---

func (s *Server) createBot(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	if err := s.feature(r.Context(), r.PathValue("ws"), parley.FeatureIntegrations); err != nil {
		return err
	}
	var in parley.NewBot
	if err := decode(r, &in, false); err != nil {
		return err
	}
	b, err := st.CreateBot(r.Context(), c.UserID, r.PathValue("ws"), in)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, b)
	return nil
}

func (s *Server) listBots(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	bots, err := st.ListBots(r.Context(), c.UserID, r.PathValue("ws"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Bots []parley.Bot `json:"bots"`
	}{nonNil(bots)})
	return nil
}

func (s *Server) revokeBot(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	if err := st.RevokeBot(r.Context(), c.UserID, r.PathValue("ws"), r.PathValue("bot_id")); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) createBotToken(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	if err := s.feature(r.Context(), r.PathValue("ws"), parley.FeatureIntegrations); err != nil {
		return err
	}
	var in struct {
		Label  string   `json:"label"`
		Scopes []string `json:"scopes"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	raw, _, err := auth.NewToken()
	if err != nil {
		return err
	}
	// The prefix tells a bot token from a login in logs and secret
	// scanners; the whole string is the token.
	token := "pbt_" + raw
	hash := auth.HashToken(token)
	bt, err := st.CreateBotToken(r.Context(), c.UserID, r.PathValue("ws"), r.PathValue("bot_id"),
		parley.NewBotToken{Label: in.Label, Scopes: in.Scopes, TokenHash: hash})
	if err != nil {
		return err
	}
	bt.Token = token // shown once; the store has only its hash
	writeJSON(w, http.StatusCreated, bt)
	return nil
}

func (s *Server) listBotTokens(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	list, err := st.ListBotTokens(r.Context(), c.UserID, r.PathValue("ws"), r.PathValue("bot_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Tokens []parley.BotToken `json:"tokens"`
	}{nonNil(list)})
	return nil
}

func (s *Server) revokeBotToken(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	if err := st.RevokeBotToken(r.Context(), c.UserID, r.PathValue("ws"), r.PathValue("token_id")); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) botAudit(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	limit, err := queryLimit(r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	page, err := st.BotAudit(r.Context(), c.UserID, r.PathValue("ws"), q.Get("bot_id"), q.Get("cursor"), limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, page)
	return nil
}

// --- incoming webhooks ---

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	var in struct {
		Name string `json:"name"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	// The channel's workspace, for its features; a channel the caller
	// cannot see is not found either way.
	ch, err := s.store.GetChannel(r.Context(), c.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := s.feature(r.Context(), ch.WorkspaceID, parley.FeatureIntegrations); err != nil {
		return err
	}
	secret := integrations.NewSecret()
	hook, err := st.CreateWebhook(r.Context(), c.UserID, r.PathValue("id"), in.Name, auth.HashToken(secret))
	if err != nil {
		return err
	}
	hook.URL = s.baseURL(r) + Prefix + "/hooks/" + hook.ID + "/" + secret
	writeJSON(w, http.StatusCreated, hook)
	return nil
}

// baseURL is the scheme and host the client reached this server at.
func (s *Server) baseURL(r *http.Request) string {
	scheme := "http"
	if s.isHTTPS(r) {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	list, err := st.ListWebhooks(r.Context(), c.UserID, r.PathValue("ws"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Webhooks []parley.Webhook `json:"webhooks"`
	}{nonNil(list)})
	return nil
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	if err := st.DeleteWebhook(r.Context(), c.UserID, r.PathValue("ws"), r.PathValue("hook_id")); err != nil {
		return err
	}
	return noContent(w)
}

// slackReply answers a webhook the way Slack does: a short plain-text
// word (ok, invalid_payload, no_text, channel_not_found, ...).
func slackReply(w http.ResponseWriter, status int, word string) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	io.WriteString(w, word)
	return nil
}

// postWebhook takes a Slack-compatible payload and posts it as the
// webhook's bot. Unknown ids and wrong secrets are alike (404): the URL
// is the credential.
func (s *Server) postWebhook(w http.ResponseWriter, r *http.Request, _ *caller) error {
	return s.secretPath(w, r, "hook_id", s.postWebhookSecret)
}

// secretPath serves a route whose path holds a secret (a webhook URL, a
// response_url): a server failure is logged by the id alone and answered
// as Slack would, so that the secret never reaches the logs through
// writeError, which logs the path.
func (s *Server) secretPath(w http.ResponseWriter, r *http.Request, idParam string, h func(http.ResponseWriter, *http.Request) error) error {
	err := h(w, r)
	if err == nil {
		return nil
	}
	switch parley.ErrorCode(err) {
	case parley.EINTERNAL:
		args := []any{"route", r.Pattern, "err", err}
		if idParam != "" {
			args = append(args, idParam, r.PathValue(idParam))
		}
		s.log.Error("integration request failed", args...)
		return slackReply(w, http.StatusInternalServerError, "internal_error")
	case parley.EUNAVAILABLE:
		w.Header().Set("Retry-After", "5")
		return slackReply(w, http.StatusServiceUnavailable, "service_unavailable")
	}
	return err
}

func (s *Server) postWebhookSecret(w http.ResponseWriter, r *http.Request) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	ctx := r.Context()
	hook, err := st.WebhookByID(ctx, r.PathValue("hook_id"))
	if err != nil {
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			return slackReply(w, http.StatusNotFound, "no_service")
		}
		return err
	}
	if !auth.TokenMatches(r.PathValue("secret"), hook.SecretHash) {
		return slackReply(w, http.StatusNotFound, "no_service")
	}
	if s.feature(ctx, hook.WorkspaceID, parley.FeatureIntegrations) != nil {
		s.metrics.integration("webhook", "refused")
		return slackReply(w, http.StatusForbidden, parley.EFEATUREOFF)
	}
	if wait, cancel := s.integ.hookLim.Reserve(hook.ID, s.now()); wait > 0 {
		cancel()
		s.metrics.integration("webhook", "rate_limited")
		w.Header().Set("Retry-After", retrySeconds(wait))
		return slackReply(w, http.StatusTooManyRequests, "rate_limited")
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		if isMaxBytes(err) {
			return slackReply(w, http.StatusRequestEntityTooLarge, "payload_too_large")
		}
		return slackReply(w, http.StatusBadRequest, "invalid_payload")
	}
	p, err := integrations.ParsePayload(r.Header.Get("Content-Type"), body)
	if err != nil {
		return slackReply(w, http.StatusBadRequest, "invalid_payload")
	}
	text, err := integrations.Render(p)
	if err != nil {
		return slackReply(w, http.StatusBadRequest, "no_text")
	}
	// username, icon_emoji and icon_url: shown beside the bot's badge.
	profile, err := parley.ValidateBotProfile(p.Profile())
	if err != nil {
		s.metrics.integration("webhook", "refused")
		return slackReply(w, http.StatusBadRequest, "invalid_payload")
	}
	_, _, err = s.store.PostMessage(ctx, hook.BotID, hook.ChannelID, parley.NewMessage{Text: text, BotProfile: profile})
	status := http.StatusOK
	switch parley.ErrorCode(err) {
	case "":
		err = slackReply(w, http.StatusOK, "ok")
	case parley.ENOTFOUND:
		status = http.StatusNotFound
		err = slackReply(w, status, "channel_not_found")
	case parley.EFORBIDDEN:
		status = http.StatusForbidden
		err = slackReply(w, status, "action_prohibited")
	case parley.ECONFLICT:
		status = http.StatusGone
		err = slackReply(w, status, "channel_is_archived")
	case parley.ERATELIMITED:
		status = http.StatusTooManyRequests
		w.Header().Set("Retry-After", "1")
		err = slackReply(w, status, "rate_limited")
	case parley.ETOOLARGE:
		status = http.StatusRequestEntityTooLarge
		err = slackReply(w, status, "msg_too_long")
	}
	s.integ.audit(ctx, hook.BotID, "webhook.post", hook.ChannelID, status)
	s.metrics.integration("webhook", outcomeOf(status))
	return err
}

// outcomeOf names an answer's status for parley_integration_calls_total.
func outcomeOf(status int) string {
	switch {
	case status < 300:
		return "ok"
	case status == http.StatusTooManyRequests:
		return "rate_limited"
	case status < 500:
		return "refused"
	}
	return "failed"
}

// --- slash commands and outgoing webhooks ---

func (s *Server) createIntegration(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	if err := s.feature(r.Context(), r.PathValue("ws"), parley.FeatureIntegrations); err != nil {
		return err
	}
	var in parley.NewIntegration
	if err := decode(r, &in, false); err != nil {
		return err
	}
	in.SigningSecret = integrations.NewSecret()
	it, err := st.CreateIntegration(r.Context(), c.UserID, r.PathValue("ws"), in)
	if err != nil {
		return err
	}
	s.integ.forgetOutgoing(it.WorkspaceID)
	writeJSON(w, http.StatusCreated, it)
	return nil
}

func (s *Server) listIntegrations(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	list, err := st.ListIntegrations(r.Context(), c.UserID, r.PathValue("ws"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Integrations []parley.Integration `json:"integrations"`
	}{nonNil(list)})
	return nil
}

func (s *Server) deleteIntegration(w http.ResponseWriter, r *http.Request, c *caller) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	ws := r.PathValue("ws")
	if err := st.DeleteIntegration(r.Context(), c.UserID, ws, r.PathValue("integration_id")); err != nil {
		return err
	}
	s.integ.forgetOutgoing(ws)
	return noContent(w)
}
