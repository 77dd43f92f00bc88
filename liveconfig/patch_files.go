package liveconfig

import "parley"

// FilePatch holds the file limit keys of a change (docs/files.md).
type FilePatch struct {
	FileMaxMB            *int `json:"file_max_mb,omitempty"`
	FileWorkspaceQuotaMB *int `json:"file_workspace_quota_mb,omitempty"`
}

// apply sets c's file keys that p gives.
func (p FilePatch) apply(c *parley.LiveConfig) error {
	return setInts([]intKey{
		{"file_max_mb", p.FileMaxMB, &c.FileMaxMB, 0, parley.MaxFileConfigMB},
		{"file_workspace_quota_mb", p.FileWorkspaceQuotaMB, &c.FileWorkspaceQuotaMB, 0, parley.MaxFileConfigMB},
	})
}
