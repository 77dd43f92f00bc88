package storeguard

import (
	"context"

	"parley"
)

// The lifecycle operations (parley.LifecycleService) through the guard.

func (g *Guard) DeactivateUser(ctx context.Context, actor, workspaceID, userID string) (*parley.User, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.User, error) {
		return g.s.DeactivateUser(ctx, actor, workspaceID, userID)
	})
}

func (g *Guard) ReactivateUser(ctx context.Context, actor, workspaceID, userID string) (*parley.User, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.User, error) {
		return g.s.ReactivateUser(ctx, actor, workspaceID, userID)
	})
}

func (g *Guard) OperatorSetDeactivated(ctx context.Context, userID string, deactivated bool) (*parley.User, error) {
	return call(g, ctx, Write, func(ctx context.Context) (*parley.User, error) {
		return g.s.OperatorSetDeactivated(ctx, userID, deactivated)
	})
}

func (g *Guard) RemoveWorkspaceMember(ctx context.Context, actor, workspaceID, userID string) error {
	_, err := call(g, ctx, Write, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, g.s.RemoveWorkspaceMember(ctx, actor, workspaceID, userID)
	})
	return err
}

func (g *Guard) TransferOwnership(ctx context.Context, actor, workspaceID, userID string) error {
	_, err := call(g, ctx, Write, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, g.s.TransferOwnership(ctx, actor, workspaceID, userID)
	})
	return err
}

func (g *Guard) DeleteWorkspace(ctx context.Context, actor, workspaceID, confirm string) error {
	_, err := call(g, ctx, Write, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, g.s.DeleteWorkspace(ctx, actor, workspaceID, confirm)
	})
	return err
}

func (g *Guard) DeletedWorkspaces(ctx context.Context) ([]string, error) {
	return call(g, ctx, Read, func(ctx context.Context) ([]string, error) { return g.s.DeletedWorkspaces(ctx) })
}

func (g *Guard) PurgeWorkspace(ctx context.Context, workspaceID string, batch int) (bool, error) {
	return call(g, ctx, Write, func(ctx context.Context) (bool, error) { return g.s.PurgeWorkspace(ctx, workspaceID, batch) })
}
