package httpapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"parley"
	"parley/auth"
	"parley/integrations"
)

// Slash commands (POST /channels/{id}/commands) and outgoing webhooks:
// the built-ins answered here, the workspace's own commands by a signed
// POST to their URL (docs/integrations.md).

// builtinCommands are the commands the server answers itself, in the
// order the composer offers them.
var builtinCommands = []commandInfo{
	{Name: "me", Usage: "[action]", Description: "Say it in the third person, in italics", Builtin: true},
	{Name: "shrug", Usage: "[message]", Description: `Append ¯\_(ツ)_/¯ to your message`, Builtin: true},
	{Name: "topic", Usage: "[text]", Description: "Set the channel's topic", Builtin: true},
	{Name: "invite", Usage: "@person", Description: "Add someone to this channel", Builtin: true},
	{Name: "leave", Usage: "", Description: "Leave this channel", Builtin: true},
}

// commandInfo is a command as the composer offers it.
type commandInfo struct {
	Name        string `json:"name"`
	Usage       string `json:"usage,omitempty"`
	Description string `json:"description"`
	Builtin     bool   `json:"builtin"`
}

// commandResult is the answer of POST /channels/{id}/commands.
type commandResult struct {
	// ResponseType is "in_channel" (something was posted: Message) or
	// "ephemeral" (only the caller sees Ephemeral, which also came to
	// their sessions as message.ephemeral).
	ResponseType string                   `json:"response_type"`
	Message      *parley.Message          `json:"message,omitempty"`
	Ephemeral    *parley.EphemeralMessage `json:"ephemeral,omitempty"`
}

func (s *Server) listCommands(w http.ResponseWriter, r *http.Request, c *caller) error {
	ws := r.PathValue("ws")
	if _, err := s.store.GetWorkspace(r.Context(), c.UserID, ws); err != nil {
		return err
	}
	out := append([]commandInfo(nil), builtinCommands...)
	if st := s.integ.store; st != nil {
		// ListIntegrations is for admins (it has the secrets); members
		// learn the names through the server's own read.
		list, err := st.Commands(r.Context(), ws)
		if err != nil {
			return err
		}
		for _, it := range list {
			out = append(out, commandInfo{Name: it.Name, Description: it.Description})
		}
	}
	writeJSON(w, http.StatusOK, struct {
		Commands []commandInfo `json:"commands"`
	}{out})
	return nil
}

func (s *Server) runCommand(w http.ResponseWriter, r *http.Request, c *caller) error {
	var in struct {
		Command      string `json:"command"`
		Text         string `json:"text"`
		ThreadRootID string `json:"thread_root_id"`
	}
	if err := decode(r, &in, false); err != nil {
		return err
	}
	name := strings.ToLower(strings.TrimPrefix(strings.TrimSpace(in.Command), "/"))
	if name == "" {
		return parley.Errorf(parley.EINVALID, "command is required, such as \"/me\"")
	}
	if err := parley.CheckText("text", in.Text); err != nil {
		return err
	}
	ctx := r.Context()
	ch, err := s.store.GetChannel(ctx, c.UserID, r.PathValue("id"))
	if err != nil {
		return err
	}
	if !ch.IsMember {
		return parley.Errorf(parley.EFORBIDDEN, "you are not a member of this channel")
	}
	if err := s.checkThread(ctx, c, ch, in.ThreadRootID); err != nil {
		return err
	}
	cc := &cmdCall{caller: c, ch: ch, root: in.ThreadRootID}
	res, err := s.builtin(ctx, cc, name, in.Text)
	if errors.Is(err, errNotBuiltin) {
		res, err = s.externalCommand(ctx, r, cc, name, in.Text)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

var errNotBuiltin = errors.New("not a built-in command")

// cmdCall is where a command was typed: by whom, in which channel, and in
// which thread of it ("" for the channel itself). Its posts, notices and
// delayed answers all go there.
type cmdCall struct {
	*caller
	ch   *parley.Channel
	root string
}

// checkThread refuses a command typed in a thread that is not a top-level
// message of ch as the caller sees it: a reply, a deleted root, a message
// of another channel or workspace are all 404, before any URL is called.
func (s *Server) checkThread(ctx context.Context, c *caller, ch *parley.Channel, root string) error {
	if root == "" {
		return nil
	}
	m, err := s.store.GetMessage(ctx, c.UserID, root)
	if err != nil {
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			return parley.Errorf(parley.ENOTFOUND, "thread not found in this channel")
		}
		return err
	}
	if m.ChannelID != ch.ID || m.ThreadRootID != "" {
		return parley.Errorf(parley.ENOTFOUND, "thread not found in this channel")
	}
	return nil
}

// builtin runs /me, /shrug, /topic, /invite and /leave. A user error
// (no such person, no right to change the topic) is the caller's
// ephemeral notice, not an HTTP error: the composer shows it in place.
func (s *Server) builtin(ctx context.Context, cc *cmdCall, name, text string) (*commandResult, error) {
	c, ch := cc.caller, cc.ch
	post := func(t string) (*commandResult, error) {
		m, _, err := s.store.PostMessage(ctx, c.UserID, ch.ID, parley.NewMessage{Text: t, ThreadRootID: cc.root})
		if err != nil {
			return nil, err
		}
		m.Reactions = nonNil(m.Reactions)
		return &commandResult{ResponseType: integrations.InChannel, Message: m}, nil
	}
	switch name {
	case "me":
		if text == "" {
			return s.notice(ctx, cc, "", "Usage: /me [action], e.g. /me waves")
		}
		return post("_" + text + "_")
	case "shrug":
		return post(strings.TrimSpace(text + ` ¯\_(ツ)_/¯`))
	case "topic":
		t := text
		if _, err := s.store.UpdateChannel(ctx, c.UserID, ch.ID, parley.ChannelPatch{Topic: &t}); err != nil {
			return s.userError(ctx, cc, "", err)
		}
		if t == "" {
			return s.notice(ctx, cc, "", "Topic cleared.")
		}
		return s.notice(ctx, cc, "", "Topic set to: "+t)
	case "invite":
		handle := strings.TrimPrefix(strings.TrimSpace(text), "@")
		if handle == "" || strings.ContainsAny(handle, " \t") {
			return s.notice(ctx, cc, "", "Usage: /invite @person")
		}
		page, err := s.store.ListWorkspaceUsers(ctx, c.UserID, ch.WorkspaceID, parley.UserQuery{Q: handle, Limit: 50})
		if err != nil {
			return nil, err
		}
		var id string
		for _, u := range page.Users {
			if strings.EqualFold(u.Handle, handle) {
				id = u.ID
			}
		}
		if id == "" {
			return s.notice(ctx, cc, "", fmt.Sprintf("Nobody called @%s is in this workspace.", handle))
		}
		if _, err := s.store.AddMembers(ctx, c.UserID, ch.ID, []string{id}); err != nil {
			return s.userError(ctx, cc, "", err)
		}
		return s.notice(ctx, cc, "", fmt.Sprintf("Added @%s to this channel.", handle))
	case "leave":
		if err := s.store.LeaveChannel(ctx, c.UserID, ch.ID); err != nil {
			return s.userError(ctx, cc, "", err)
		}
		return &commandResult{ResponseType: integrations.Ephemeral}, nil
	case "remind":
		return s.notice(ctx, cc, "", "/remind is not available yet.")
	}
	return nil, errNotBuiltin
}

// userError turns a refusal the caller can understand into an ephemeral
// notice; anything else stays an error.
func (s *Server) userError(ctx context.Context, cc *cmdCall, from string, err error) (*commandResult, error) {
	switch parley.ErrorCode(err) {
	case parley.EFORBIDDEN, parley.ENOTFOUND, parley.EINVALID, parley.ECONFLICT, parley.ELIMIT, parley.ETOOLARGE:
		return s.notice(ctx, cc, from, parley.ErrorMessage(err))
	}
	return nil, err
}

// notice shows text to the caller only, in the channel or thread the
// command was typed in: message.ephemeral to their sessions, and in the
// answer.
func (s *Server) notice(ctx context.Context, cc *cmdCall, from, text string) (*commandResult, error) {
	return s.noticeAs(ctx, cc, from, text, nil)
}

// noticeAs is notice with the bot's name and icon of a command's answer.
func (s *Server) noticeAs(ctx context.Context, cc *cmdCall, from, text string, profile *parley.BotProfile) (*commandResult, error) {
	m := &parley.EphemeralMessage{ID: parley.NewID(parley.PrefixEphemeralMsg), ChannelID: cc.ch.ID, UserID: from, Text: text,
		ThreadRootID: cc.root, BotProfile: profile, CreatedAt: s.now().UTC()}
	if st := s.integ.store; st != nil {
		if err := st.SendEphemeral(ctx, cc.ch.WorkspaceID, cc.UserID, *m); err != nil {
			return nil, err
		}
	}
	return &commandResult{ResponseType: integrations.Ephemeral, Ephemeral: m}, nil
}

// externalCommand calls the workspace's command URL and posts or shows
// its answer. Every failure of the URL is the caller's ephemeral notice.
func (s *Server) externalCommand(ctx context.Context, r *http.Request, cc *cmdCall, name, text string) (*commandResult, error) {
	c, ch := cc.caller, cc.ch
	st, err := s.needInteg()
	if err != nil {
		return nil, err
	}
	if err := s.feature(ctx, ch.WorkspaceID, parley.FeatureIntegrations); err != nil {
		return nil, err
	}
	cmd, err := st.CommandByName(ctx, ch.WorkspaceID, name)
	if err != nil {
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			return s.notice(ctx, cc, "", fmt.Sprintf("/%s is not a command here. Type / to see the commands you can use.", name))
		}
		return nil, err
	}
	me, err := s.store.GetMe(ctx, c.UserID)
	if err != nil {
		return nil, err
	}
	ws, err := s.store.GetWorkspace(ctx, c.UserID, ch.WorkspaceID)
	if err != nil {
		return nil, err
	}
	token := integrations.NewSecret()
	grant := parley.CommandResponse{WorkspaceID: ch.WorkspaceID, IntegrationID: cmd.ID, ChannelID: ch.ID, UserID: c.UserID, ThreadRootID: cc.root}
	if err := st.GrantResponse(ctx, auth.HashToken(token), grant, s.now().Add(responseTTL), responseUses); err != nil {
		return nil, err
	}
	form := url.Values{
		"command":      {"/" + name},
		"text":         {text},
		"user_id":      {c.UserID},
		"user_name":    {me.Handle},
		"channel_id":   {ch.ID},
		"channel_name": {channelName(ch)},
		"team_id":      {ws.ID},
		"team_domain":  {ws.Slug},
		"workspace_id": {ws.ID},
		"response_url": {s.baseURL(r) + Prefix + "/command-responses/" + token},
		"trigger_id":   {parley.NewID("")},
		"api_app_id":   {cmd.ID},
	}
	if cc.root != "" {
		// Slack names the thread thread_ts; in Parley it is the root
		// message's id, sent under both names.
		form.Set("thread_ts", cc.root)
		form.Set("thread_root_id", cc.root)
	}
	ans, err := s.integ.caller.Post(ctx, cmd.URL, cmd.SigningSecret, form)
	if err != nil {
		var ce *integrations.CallError
		if errors.As(err, &ce) {
			s.metrics.integration("command", "failed")
			s.log.Info("slash command failed", "command", name, "workspace_id", ch.WorkspaceID, "err", err)
			s.integ.audit(ctx, cmd.BotID, "command.failed", "/"+name, http.StatusBadGateway)
			return s.notice(ctx, cc, cmd.BotID, fmt.Sprintf("/%s failed: %s.", name, ce.Msg))
		}
		return nil, err
	}
	s.metrics.integration("command", "ok")
	return s.deliverAnswer(ctx, cc, cmd.BotID, ans)
}

// deliverAnswer posts an in_channel answer as the bot (putting the bot in
// the channel first, by the caller's right) or shows an ephemeral one, in
// the channel or thread the command was typed in, with the name and icon
// the answer asked for. An answer whose overrides are not valid is the
// caller's notice, and nothing is posted.
func (s *Server) deliverAnswer(ctx context.Context, cc *cmdCall, botID string, ans *integrations.Answer) (*commandResult, error) {
	if ans.Text == "" {
		return &commandResult{ResponseType: integrations.Ephemeral}, nil // an acknowledgement
	}
	profile, err := parley.ValidateBotProfile(ans.Profile)
	if err != nil {
		return s.notice(ctx, cc, botID, "The integration's answer was refused: "+parley.ErrorMessage(err)+".")
	}
	if ans.ResponseType != integrations.InChannel {
		return s.noticeAs(ctx, cc, botID, ans.Text, profile)
	}
	m, err := s.postAsBot(ctx, cc.UserID, cc.ch.ID, botID, parley.NewMessage{Text: ans.Text, ThreadRootID: cc.root, BotProfile: profile})
	if err != nil {
		return s.userError(ctx, cc, botID, err)
	}
	return &commandResult{ResponseType: integrations.InChannel, Message: m}, nil
}

// postAsBot posts text as botID in a channel, adding the bot to it first
// (as actor) when it is not a member.
func (s *Server) postAsBot(ctx context.Context, actor, channelID, botID string, nm parley.NewMessage) (*parley.Message, error) {
	in, err := s.store.ChannelMember(ctx, botID, channelID)
	if err != nil {
		return nil, err
	}
	if !in {
		if _, err := s.store.AddMembers(ctx, actor, channelID, []string{botID}); err != nil {
			return nil, err
		}
	}
	m, _, err := s.store.PostMessage(ctx, botID, channelID, nm)
	status := http.StatusCreated
	if err != nil {
		status = StatusOf(parley.ErrorCode(err))
	}
	s.integ.audit(ctx, botID, "command.post", channelID, status)
	if err != nil {
		return nil, err
	}
	m.Reactions = nonNil(m.Reactions)
	return m, nil
}

func channelName(ch *parley.Channel) string {
	if ch.Kind.IsDM() {
		return "directmessage"
	}
	return ch.Name
}

// commandResponse takes a delayed answer at a response_url. Slack's
// answers: ok, or a word saying what was wrong.
func (s *Server) commandResponse(w http.ResponseWriter, r *http.Request, _ *caller) error {
	return s.secretPath(w, r, "", s.commandResponseSecret) // the path's one value is the secret
}

func (s *Server) commandResponseSecret(w http.ResponseWriter, r *http.Request) error {
	st, err := s.needInteg()
	if err != nil {
		return err
	}
	ctx := r.Context()
	grant, err := st.UseResponse(ctx, auth.HashToken(r.PathValue("token")))
	if err != nil {
		if parley.ErrorCode(err) == parley.ENOTFOUND {
			return slackReply(w, http.StatusNotFound, "expired_url")
		}
		return err
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return slackReply(w, http.StatusBadRequest, "invalid_payload")
	}
	ans, err := integrations.ParseAnswer("application/json", body)
	if err != nil || ans.Text == "" {
		return slackReply(w, http.StatusBadRequest, "no_text")
	}
	ch, err := s.store.GetChannel(ctx, grant.UserID, grant.ChannelID)
	if err != nil {
		return slackReply(w, http.StatusNotFound, "channel_not_found")
	}
	// The thread was checked when the command ran; a root deleted since
	// refuses the post, which becomes the caller's notice.
	cc := &cmdCall{caller: &caller{UserID: grant.UserID}, ch: ch, root: grant.ThreadRootID}
	if _, err := s.deliverAnswer(ctx, cc, grant.BotID, ans); err != nil {
		return err
	}
	return slackReply(w, http.StatusOK, "ok")
}

// afterPost fires the outgoing webhooks whose trigger word starts a
// person's new message, unless the workspace has integrations turned off.
// It returns at once; the calls run in the background, bounded per node.
func (s *Server) afterPost(ctx context.Context, c *caller, m *parley.Message) {
	in := s.integ
	if in.store == nil || c.bot() || m.ThreadRootID != "" || m.WorkspaceID == "" {
		return
	}
	hooks, err := in.outgoingOf(m.WorkspaceID)
	if err != nil {
		in.log.Warn("outgoing webhooks: load failed", "workspace_id", m.WorkspaceID, "err", err)
		return
	}
	// Looked up only for a workspace that has outgoing webhooks: most
	// posts pay nothing.
	if len(hooks) > 0 && !parley.LimitsFor(ctx, m.WorkspaceID).Enabled(parley.FeatureIntegrations) {
		return
	}
	for _, h := range hooks {
		if h.ChannelID != m.ChannelID {
			continue
		}
		word, ok := integrations.MatchTrigger(h.TriggerWords, m.Text)
		if !ok {
			continue
		}
		select {
		case in.outgoingSem <- struct{}{}:
		default:
			in.log.Warn("outgoing webhooks: too many calls in flight; skipped", "integration_id", h.ID)
			continue
		}
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			defer func() { <-in.outgoingSem }()
			defer func() {
				if v := recover(); v != nil {
					in.log.Error("outgoing webhook panicked", "integration_id", h.ID, "panic", v)
					s.panics.Inc()
				}
			}()
			in.fireOutgoing(h, m, word)
		}()
	}
}

// fireOutgoing calls one outgoing webhook and posts its answer as its bot;
// a failure is the poster's ephemeral notice.
func (in *integ) fireOutgoing(h parley.Integration, m *parley.Message, word string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*in.caller.Timeout+10*time.Second)
	defer cancel()
	s := in.srv
	form := url.Values{
		"token":        {""},
		"team_id":      {m.WorkspaceID},
		"workspace_id": {m.WorkspaceID},
		"channel_id":   {m.ChannelID},
		"timestamp":    {fmt.Sprintf("%d", m.CreatedAt.Unix())},
		"message_id":   {m.ID},
		"user_id":      {m.UserID},
		"text":         {m.Text},
		"trigger_word": {word},
	}
	if ch, err := s.store.GetChannel(ctx, m.UserID, m.ChannelID); err == nil {
		form.Set("channel_name", channelName(ch))
	}
	if me, err := s.store.GetMe(ctx, m.UserID); err == nil {
		form.Set("user_name", me.Handle)
	}
	ans, err := in.caller.Post(ctx, h.URL, h.SigningSecret, form)
	cc := &cmdCall{caller: &caller{UserID: m.UserID}, ch: &parley.Channel{ID: m.ChannelID, WorkspaceID: m.WorkspaceID}}
	if err != nil {
		s.metrics.integration("outgoing", "failed")
		in.audit(ctx, h.BotID, "outgoing.failed", m.ChannelID, http.StatusBadGateway)
		var ce *integrations.CallError
		if errors.As(err, &ce) {
			if _, err := s.notice(ctx, cc, h.BotID, fmt.Sprintf("The outgoing webhook %q failed: %s.", h.Name, ce.Msg)); err != nil {
				in.log.Warn("outgoing webhook: notice failed", "integration_id", h.ID, "err", err)
			}
		}
		return
	}
	s.metrics.integration("outgoing", "ok")
	if ans.Text == "" {
		return
	}
	// An outgoing webhook's answer goes in the channel (Slack posts it
	// whatever its response_type).
	profile, err := parley.ValidateBotProfile(ans.Profile)
	if err != nil {
		in.log.Info("outgoing webhook: answer's bot profile refused", "integration_id", h.ID, "err", err)
		profile = nil // the text still goes; a bad name or icon is dropped
	}
	if _, err := s.postAsBot(ctx, m.UserID, m.ChannelID, h.BotID, parley.NewMessage{Text: ans.Text, BotProfile: profile}); err != nil {
		in.log.Warn("outgoing webhook: post failed", "integration_id", h.ID, "err", err)
	}
}

// outgoingOf returns a workspace's outgoing webhooks, read at most every
// outgoingTTL.
func (in *integ) outgoingOf(ws string) ([]parley.Integration, error) {
	now := in.srv.now()
	in.mu.Lock()
	e, ok := in.outgoing[ws]
	in.mu.Unlock()
	if ok && now.Sub(e.at) < outgoingTTL {
		return e.hooks, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), auditTimeout)
	defer cancel()
	hooks, err := in.store.OutgoingWebhooks(ctx, ws)
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	if len(in.outgoing) > 10_000 {
		clear(in.outgoing) // a bound, not a policy: they reload on use
	}
	in.outgoing[ws] = outgoingEntry{hooks: hooks, at: now}
	in.mu.Unlock()
	return hooks, nil
}

// forgetOutgoing drops this node's copy after a change made here.
func (in *integ) forgetOutgoing(ws string) {
	in.mu.Lock()
	delete(in.outgoing, ws)
	in.mu.Unlock()
}
