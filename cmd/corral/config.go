package main

import (
	"io/fs"
	"log/slog"
	"strings"

	clog "github.com/containerd/log"
	"github.com/corral-sandbox/corral/internal/config"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// configFlags maps the persistent flags that config.Resolve reads to
// their setting keys.
var configFlags = map[string]string{
	"address":                 config.KeyAddress,
	"namespace":               config.KeyNamespace,
	"state-dir":               config.KeyStateDir,
	"runtime":                 config.KeyRuntime,
	"image":                   config.KeyImage,
	"log-level":               config.KeyLogLevel,
	"allow-foreign-namespace": config.KeyAllowForeignNamespace,
	"kubelet-root":            config.KeyKubeletRoot, // the daemon's --kubelet-root (Pod mode)
	"max-sessions":            config.KeyMaxSessions, // the daemon's caps (as kubelet-root: daemon flags read through the config)
	"max-memory":              config.KeyMaxMemory,
	"max-connections":         config.KeyMaxConnections,
	"max-kept-patch-bytes":    config.KeyMaxKeptPatchBytes,
	"kept-patch-retention":    config.KeyKeptPatchRetention,
	"daemon":                  config.KeyDaemonSocket, // the daemon client's --daemon SOCKET, where it exists
}

// addConfigFlags adds the flags of the configuration itself: the file,
// the log level and the foreign-namespace switch.
func (g *globalFlags) addConfigFlags(pf *pflag.FlagSet) {
	pf.StringVar(&g.configPath, "config", "", "config file (default $CORRAL_CONFIG, else "+config.DefaultPath+" when it exists); flags win over CORRAL_* variables, which win over the file")
	pf.StringVar(&g.logLevel, "log-level", "", "log level: debug, info, warn or error (default warn; $CORRAL_LOG_LEVEL, config log_level)")
	pf.BoolVar(&g.allowForeign, "allow-foreign-namespace", false, "allow Docker's (moby) or Kubernetes' (k8s.io) containerd namespace on purpose")
}

// noConfig names the commands that read no configuration: what runs
// inside a container, what only prints corral itself, and cobra's help
// and completion.
var noConfig = map[string]bool{"fs": true, "version": true, "help": true, "completion": true, "man": true,
	cobra.ShellCompRequestCmd: true, cobra.ShellCompNoDescRequestCmd: true}

// reportConfig names the commands that report a configuration error
// instead of failing on it.
var reportConfig = map[string]bool{"doctor": true}

// prepare runs before every command: it resolves the configuration (flags
// > CORRAL_* environment > config file > defaults) into g, starts the
// logger and checks --repo.
func (g *globalFlags) prepare(cmd *cobra.Command) error {
	for c := cmd; c != nil; c = c.Parent() {
		if noConfig[c.Name()] {
			return nil
		}
	}
	flags := map[string]string{}
	for name, key := range configFlags {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			flags[key] = f.Value.String()
		}
	}
	cfg, err := config.Resolve(config.Inputs{ConfigPath: g.configPath, Flags: flags})
	if err != nil {
		if !reportConfig[cmd.Name()] {
			return usageError(err)
		}
		g.configErr = err
		// Go on with what the flags alone say, else the defaults.
		none := config.Inputs{Getenv: func(string) string { return "" }, ReadFile: func(string) ([]byte, error) { return nil, fs.ErrNotExist }}
		withFlags := none
		withFlags.Flags = flags
		if cfg, err = config.Resolve(withFlags); err != nil {
			cfg, _ = config.Resolve(none)
		}
	}
	g.cfg = cfg
	g.address, g.namespace, g.stateDir, g.runtime, g.image = cfg.Address, cfg.Namespace, cfg.StateDir, cfg.Runtime, cfg.Image
	// containerd's client logs through its own logger (logrus, level info
	// by default: "fetch failed" when an --image is pulled), outside slog;
	// hold it to the same level.
	_ = clog.SetLevel(strings.ToLower(g.level(defaultCLILevel).String()))
	if log := g.logger(cmd.ErrOrStderr(), defaultCLILevel); log.Enabled(cmd.Context(), slog.LevelDebug) {
		args := []any{"file", cfg.File}
		for _, k := range config.Keys() {
			args = append(args, k, cfg.Sources[k])
		}
		log.Debug("configuration resolved: where each setting came from", args...)
	}
	return checkRepoFlag(cmd)
}
