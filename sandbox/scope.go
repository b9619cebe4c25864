package sandbox

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/allowlist"
)

// AgentsDir holds one subtree per agent: an agent session (AgentID) may
// write only openwiki/agents/<id>/.
const AgentsDir = DefaultWriteDir + "/agents"

// agentIDPattern is the character set of a stable agent id. A display
// name never matters: only this id selects the subtree.
var agentIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidAgentID checks an agent id: 1 to 63 characters of a-z, 0-9, '_'
// and '-', starting with a letter or a digit. Errors wrap
// errdefs.ErrInvalidArgument.
func ValidAgentID(id string) error {
	if !agentIDPattern.MatchString(id) {
		return fmt.Errorf("agent id %q: %w: want 1 to 63 characters of a-z, 0-9, '_' and '-', starting with a letter or a digit", id, errdefs.ErrInvalidArgument)
	}
	return nil
}

// scopeDir returns the writable directory the launcher chose: the agent's
// subtree, WriteDir, or openwiki/. Page, WriteDir and AgentID exclude each
// other; WriteDir must be openwiki/ or below it and may not name a .git or
// .claims directory.
func scopeDir(cfg SessionConfig) (string, error) {
	n := 0
	for _, set := range []bool{cfg.Page != "", cfg.WriteDir != "", cfg.AgentID != ""} {
		if set {
			n++
		}
	}
	if n > 1 {
		return "", fmt.Errorf("session: %w: a page, a scope directory and an agent id exclude each other", errdefs.ErrInvalidArgument)
	}
	if cfg.AgentID != "" {
		if err := ValidAgentID(cfg.AgentID); err != nil {
			return "", err
		}
		return AgentsDir + "/" + cfg.AgentID, nil
	}
	if cfg.WriteDir == "" {
		return DefaultWriteDir, nil
	}
	d, err := allowlist.CleanPath(cfg.WriteDir)
	if err != nil {
		return "", fmt.Errorf("scope %q: %w: %v", cfg.WriteDir, errdefs.ErrInvalidArgument, err)
	}
	if d != DefaultWriteDir && !strings.HasPrefix(d, DefaultWriteDir+"/") {
		return "", fmt.Errorf("scope %q: %w: must be %s/ or a directory below it", cfg.WriteDir, errdefs.ErrInvalidArgument, DefaultWriteDir)
	}
	for _, c := range strings.Split(d, "/") {
		if strings.EqualFold(c, ".git") || strings.EqualFold(c, ".claims") {
			return "", fmt.Errorf("scope %q: %w: %s is never writable", cfg.WriteDir, errdefs.ErrInvalidArgument, c)
		}
	}
	return d, nil
}
