package gateway

import (
	"context"

	"parley"
)

// Who gets what beyond a session's channels (docs/protocol.md, "Who receives
// what"): the users in its view (their profile topics), the admins' topic
// while its user administers the workspace, and the public channels it
// previews (in focus without being a member). All of it runs on the
// session's partition goroutine, except the store read of a preview.

// maxPreviews bounds the channels one session previews at once: a client
// shows one or two channels; focus may name up to maxFocusChannels.
const maxPreviews = 8

// setInView makes the session follow the profile topics of ids (the users
// it has in view and may see) and no others. Its own user is left out: its
// own changes come on its user topic.
func (p *partition) setInView(s *session, ids []string) {
	if s.removed {
		return
	}
	p.cur = s
	keep := make(map[string]bool, len(ids))
	for _, id := range ids {
		if id != s.userID {
			keep[id] = true
		}
	}
	for id := range s.inView {
		if !keep[id] {
			delete(s.inView, id)
			p.indexRemove(parley.TopicProfile(id), s)
			p.env.later(subOp{topic: parley.TopicProfile(id), release: true})
		}
	}
	for id := range keep {
		if s.inView[id] {
			continue
		}
		if s.inView == nil {
			s.inView = map[string]bool{}
		}
		s.inView[id] = true
		p.indexAdd(parley.TopicProfile(id), s)
		p.env.later(subOp{topic: parley.TopicProfile(id)})
	}
}

// setAdmin makes the session follow the admins' topic, or stop, when its
// user's role changes.
func (p *partition) setAdmin(s *session, admin bool) {
	if s.removed || s.admin == admin {
		return
	}
	p.cur = s
	s.admin = admin
	topic := parley.TopicAdmins(s.workspaceID)
	if admin {
		s.topics = append(s.topics, topic)
		p.indexAdd(topic, s)
		p.env.later(subOp{topic: topic})
		return
	}
	for i, t := range s.topics {
		if t == topic {
			s.topics = append(s.topics[:i], s.topics[i+1:]...)
			break
		}
	}
	p.indexRemove(topic, s)
	p.env.later(subOp{topic: topic, release: true})
}

// setViewing records the channels in focus and ends the previews of those
// no longer in it. It returns the channels in focus that the session
// neither follows nor previews: candidates for a preview, which the store
// must allow first (startPreviews).
func (p *partition) setViewing(s *session, ids []string) []string {
	if s.removed {
		return nil
	}
	p.cur = s
	viewing := make(map[string]bool, len(ids))
	var added []string
	for _, id := range ids {
		if !viewing[id] && !s.viewing[id] {
			added = append(added, id)
		}
		viewing[id] = true
	}
	s.viewing = viewing
	p.focusChanged(s, added)
	var want []string
	previews := 0
	for id, cp := range s.chans {
		if cp.preview {
			if !viewing[id] {
				p.endPreview(s, id)
				continue
			}
			previews++
		}
	}
	for _, id := range ids {
		if _, ok := s.chans[id]; !ok && previews+len(want) < maxPreviews {
			want = append(want, id)
		}
	}
	return want
}

// preview starts delivering a public channel the session's user may see but
// is not in, from its seq last, while it stays in focus.
func (p *partition) preview(s *session, channelID string, last int64) {
	if s.removed || !s.viewing[channelID] {
		return
	}
	if _, ok := s.chans[channelID]; ok {
		return // followed meanwhile (joined, or an earlier preview)
	}
	p.cur = s
	p.join(s, channelID, last)
	if cp := s.chans[channelID]; cp != nil {
		cp.preview = true
		p.env.metrics.previews.Inc()
	}
}

// endPreview stops a preview. What the channel's stream gave stays given.
func (p *partition) endPreview(s *session, channelID string) {
	p.leave(s, channelID)
	delete(s.left, channelID) // not a membership: nothing on the user topic to filter
}

// focus records the channels on screen: typing goes to them, and each public
// channel among them that the user is not in is previewed (its events
// delivered) while it stays there.
func (g *Gateway) focus(s *session, ids []string) {
	s.setFocus(ids)
	s.p.postAsync(func() {
		want := s.p.setViewing(s, ids)
		if len(want) > 0 {
			go g.startPreviews(s, want)
		}
	})
}

// startPreviews asks the store, off the partition, which of ids the
// session's user may read without being a member (public channels of the
// session's workspace; not for guests), and previews those.
func (g *Gateway) startPreviews(s *session, ids []string) {
	defer func() {
		if v := recover(); v != nil {
			g.logPanic(panicPreview, v, "session_id", s.id)
		}
	}()
	for _, id := range ids {
		if len(id) > maxIDBytes || parley.CheckText("channel_id", id) != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		ch, err := g.store.GetChannel(ctx, s.userID, id)
		cancel()
		if err != nil {
			if code := parley.ErrorCode(err); code != parley.ENOTFOUND && code != parley.EFORBIDDEN && code != parley.EINVALID {
				g.log.Warn("gateway preview read failed", "channel_id", id, "err", err)
			}
			continue
		}
		if ch.WorkspaceID != s.workspaceID || ch.Kind != parley.KindPublic || ch.IsMember {
			continue // a member follows it already, or will on its member.joined
		}
		last := ch.LastSeq
		s.p.postAsync(func() { s.p.preview(s, id, last) })
	}
}
