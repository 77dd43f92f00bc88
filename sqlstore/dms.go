package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"parley"
)

// errDMRace marks an OpenDM that lost a race to create the same DM: the
// other writer's channel is there now, so the operation runs once more and
// finds it.
var errDMRace = errors.New("dm created concurrently")

// OpenDM returns the dm (one other participant) or group_dm (2 to
// parley.MaxGroupDMOthers others) between actor and userIDs, creating it the
// first time. The participant set, actor included, identifies the DM.
func (s *Store) OpenDM(ctx context.Context, actor, workspaceID string, userIDs []string) (*parley.Channel, bool, error) {
	others := dedupe(userIDs, actor)
	var (
		ch      *parley.Channel
		created bool
	)
	fn := func(ctx context.Context, tx *Tx) error {
		ch, created = nil, false
		if _, err := workspaceRole(ctx, tx, workspaceID, actor); err != nil {
			return err
		}
		switch {
		case len(others) == 0:
			return parley.Errorf(parley.EINVALID, "user_ids must name at least one other user")
		case len(others) > parley.MaxGroupDMOthers:
			return parley.Errorf(parley.EINVALID, "a group DM has at most %d other participants", parley.MaxGroupDMOthers)
		}
		if err := checkWorkspaceUsers(ctx, tx, workspaceID, others); err != nil {
			return err
		}
		participants := append([]string{actor}, others...)
		key := dmKey(participants)
		existing, err := findDM(ctx, tx, actor, workspaceID, key)
		if err != nil {
			return err
		}
		if existing != nil {
			ch = existing
			if !ch.IsMember {
				// A participant who left a group DM comes back by opening it
				// again; the others' memberships are left as they are.
				if _, err := tx.addMember(ctx, ch, actor, actor); err != nil {
					return err
				}
				ch.UpdatedAt = tx.now
			}
			return nil
		}
		kind := parley.KindDM
		if len(others) > 1 {
			kind = parley.KindGroupDM
		}
		ch, err = tx.createChannel(ctx, newChannel{
			workspaceID: workspaceID,
			kind:        kind,
			creator:     actor,
			dmKey:       key,
			members:     splitDMKey(key),
		})
		if parley.ErrorCode(err) == parley.ECONFLICT {
			return errDMRace
		}
		if err != nil {
			return err
		}
		created = true
		// Every participant's sessions learn of the new conversation. The
		// payload fits them all: each is a member with nothing unread.
		topics := make([]string, len(ch.DMUserIDs))
		for i, u := range ch.DMUserIDs {
			topics[i] = parley.TopicUser(u)
		}
		return tx.emit(workspaceID, parley.EventDMOpened, parley.DMOpenedData{Channel: ch}, topics...)
	}
	err := s.write(ctx, "open dm", fn)
	if errors.Is(err, errDMRace) {
		err = s.write(ctx, "open dm", fn)
	}
	if err != nil {
		return nil, false, err
	}
	return ch, created, nil
}

// findDM returns the DM with that participant key as actor sees it, or nil.
func findDM(ctx context.Context, q querier, actor, workspaceID, key string) (*parley.Channel, error) {
	ch, err := scanChannel(q.QueryRowContext(ctx, `SELECT `+channelColumns+channelFrom+`
		WHERE c.workspace_id = $2 AND c.dm_key = $3`, actor, workspaceID, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("find dm: %w", err)
	}
	return ch, nil
}

// dedupe returns ids without duplicates and without drop, in first-seen
// order.
func dedupe(ids []string, drop string) []string {
	seen := make(map[string]bool, len(ids))
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id == drop || seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, id)
	}
	return out
}
