// Package config resolves the launcher's settings of every corral command
// and of the daemon, from four sources in a fixed precedence: command-line
// flags, then CORRAL_* environment variables, then the config file, then
// the defaults. The config file is YAML (/etc/corral/config.yaml unless
// --config or $CORRAL_CONFIG names another), decoded strictly by
// internal/yamlstrict: an unknown key is an error naming the file, the line
// and the key.
//
// Resolve ends with Validate (gVisor's runsc/config does the same after
// its flags): a log level corral does not know, a relative state
// directory, or Docker's or Kubernetes' containerd namespace without
// allow_foreign_namespace fail there.
package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/containerd/errdefs"
	"github.com/corral-sandbox/corral/internal/yamlstrict"
	"github.com/corral-sandbox/corral/sandbox"
	units "github.com/docker/go-units"
)

// DefaultPath is the config file read when neither --config nor
// $CORRAL_CONFIG names one; its absence is not an error.
const DefaultPath = "/etc/corral/config.yaml"

// DefaultDaemonSocket is where `corral daemon` listens and its clients
// connect unless told otherwise.
const DefaultDaemonSocket = "/run/corral/corral.sock"

// Setting keys: the config file's keys, and the names Inputs.Flags and
// Config.Sources use.
const (
	KeyAddress               = "address"
	KeyNamespace             = "namespace"
	KeyStateDir              = "state_dir"
	KeyRuntime               = "runtime"
	KeyImage                 = "image"
	KeyDaemonSocket          = "daemon_socket"
	KeyLogLevel              = "log_level"
	KeyAllowForeignNamespace = "allow_foreign_namespace"
	KeyKubeletRoot           = "kubelet_root"
	KeyMaxSessions           = "max_sessions"
	KeyMaxMemory             = "max_memory"
	KeyMaxConnections        = "max_connections"
	KeyMaxKeptPatchBytes     = "max_kept_patch_bytes"
	KeyKeptPatchRetention    = "kept_patch_retention"
)

// Defaults of the daemon's kept-patch limits.
const (
	// DefaultMaxKeptPatchBytes is --max-kept-patch-bytes' default.
	DefaultMaxKeptPatchBytes = "256MiB"
	// DefaultKeptPatchRetention is --kept-patch-retention's default.
	DefaultKeptPatchRetention = "168h"
)

// File is the config file's schema. Every key is optional.
type File struct {
	// Address is containerd's socket.
	Address string `yaml:"address"`
	// Namespace is the containerd namespace corral works in.
	Namespace string `yaml:"namespace"`
	// StateDir is corral's state directory (absolute).
	StateDir string `yaml:"state_dir"`
	// Runtime is the runtime corral's containers run with.
	Runtime string `yaml:"runtime"`
	// Image is the tools image.
	Image string `yaml:"image"`
	// DaemonSocket is the unix socket of `corral daemon`.
	DaemonSocket string `yaml:"daemon_socket"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `yaml:"log_level"`
	// AllowForeignNamespace lets Namespace be Docker's ("moby") or
	// Kubernetes' ("k8s.io").
	AllowForeignNamespace *bool `yaml:"allow_foreign_namespace"`
	// KubeletRoot is the kubelet's root directory on the node
	// (/var/lib/kubelet); set, it puts `corral daemon` in Pod mode.
	KubeletRoot string `yaml:"kubelet_root"`
	// MaxSessions caps the sessions `corral daemon` holds, every owner's
	// together; 0 for no cap.
	MaxSessions *int `yaml:"max_sessions"`
	// MaxMemory caps the memory limits of the calls `corral daemon` runs
	// at once: bytes, or a size with a unit ("8GiB"); "0" for no cap.
	MaxMemory string `yaml:"max_memory"`
	// MaxConnections caps the connections open to `corral daemon`; 0 for
	// its default (1024).
	MaxConnections *int `yaml:"max_connections"`
	// MaxKeptPatchBytes caps the bytes of the patches `corral daemon`
	// keeps for one owner (a Pod in Pod mode): bytes, or a size with a
	// unit ("256MiB"); "0" for no cap.
	MaxKeptPatchBytes string `yaml:"max_kept_patch_bytes"`
	// KeptPatchRetention is how long `corral daemon` in Pod mode keeps an
	// ended session's patch (a Go duration, "168h"); "0" keeps them.
	KeptPatchRetention string `yaml:"kept_patch_retention"`
}

// Config is the resolved configuration.
type Config struct {
	Address               string
	Namespace             string
	StateDir              string
	Runtime               string
	Image                 string
	DaemonSocket          string
	LogLevel              string // "" when no source set it: the command's default applies
	AllowForeignNamespace bool
	// KubeletRoot is the kubelet's root directory (absolute); "" is the
	// default: the daemon is not in Pod mode.
	KubeletRoot string
	// MaxSessions is the daemon's cap on sessions (0: none).
	MaxSessions int
	// MaxMemory is the daemon's cap, in bytes, on the memory limits of
	// the calls running at once (0: none).
	MaxMemory int64
	// MaxConnections is the daemon's cap on open connections (0: the
	// daemon's default, 1024).
	MaxConnections int
	// MaxKeptPatchBytes is the daemon's cap, in bytes, on one owner's
	// kept patches (0: none).
	MaxKeptPatchBytes int64
	// KeptPatchRetention is how long the daemon in Pod mode keeps an
	// ended session's patch (0: for ever).
	KeptPatchRetention time.Duration
	// File is the config file that was read; "" when there was none.
	File string
	// Sources says where each setting came from, by key: "flag --x",
	// "env CORRAL_X", "file PATH" or "default".
	Sources map[string]string
}

// Inputs are the sources Resolve reads besides the file.
type Inputs struct {
	// ConfigPath is --config; "" means $CORRAL_CONFIG, else DefaultPath.
	ConfigPath string
	// Flags are the settings given on the command line, by key (only
	// the flags the user set; a flag's default is not a setting).
	Flags map[string]string
	// Getenv reads the environment; nil means os.Getenv.
	Getenv func(string) string
	// ReadFile reads the config file; nil means os.ReadFile.
	ReadFile func(string) ([]byte, error)
}

// env lists the environment variables of each key, first match wins.
// CONTAINERD_ADDRESS is containerd's own variable (ctr reads it too);
// CORRAL_DAEMON is the daemon client's name for the socket.
var env = map[string][]string{
	KeyAddress:               {"CORRAL_ADDRESS", "CONTAINERD_ADDRESS"},
	KeyNamespace:             {"CORRAL_NAMESPACE"},
	KeyStateDir:              {"CORRAL_STATE_DIR"},
	KeyRuntime:               {"CORRAL_RUNTIME"},
	KeyImage:                 {"CORRAL_IMAGE"},
	KeyDaemonSocket:          {"CORRAL_DAEMON_SOCKET", "CORRAL_DAEMON"},
	KeyLogLevel:              {"CORRAL_LOG_LEVEL"},
	KeyAllowForeignNamespace: {"CORRAL_ALLOW_FOREIGN_NAMESPACE"},
	KeyKubeletRoot:           {"CORRAL_KUBELET_ROOT"},
	KeyMaxSessions:           {"CORRAL_MAX_SESSIONS"},
	KeyMaxMemory:             {"CORRAL_MAX_MEMORY"},
	KeyMaxConnections:        {"CORRAL_MAX_CONNECTIONS"},
	KeyMaxKeptPatchBytes:     {"CORRAL_MAX_KEPT_PATCH_BYTES"},
	KeyKeptPatchRetention:    {"CORRAL_KEPT_PATCH_RETENTION"},
}

// Env returns the environment variables that set key, in precedence order.
func Env(key string) []string { return env[key] }

// EnvNames returns every environment variable Resolve reads as a
// setting (CORRAL_CONFIG included), sorted. A CI job or agent host that
// sets one of these for another purpose reconfigures corral.
func EnvNames() []string {
	names := []string{"CORRAL_CONFIG"}
	for _, vs := range env {
		names = append(names, vs...)
	}
	sort.Strings(names)
	return names
}

var defaults = map[string]string{
	KeyAddress:               sandbox.DefaultAddress,
	KeyNamespace:             sandbox.DefaultNamespace,
	KeyStateDir:              sandbox.DefaultStateDir,
	KeyRuntime:               sandbox.DefaultRuntime,
	KeyImage:                 sandbox.DefaultImageRef,
	KeyDaemonSocket:          DefaultDaemonSocket,
	KeyLogLevel:              "",
	KeyAllowForeignNamespace: "false",
	KeyKubeletRoot:           "",
	KeyMaxSessions:           "0",
	KeyMaxMemory:             "0",
	KeyMaxConnections:        "0",
	KeyMaxKeptPatchBytes:     DefaultMaxKeptPatchBytes,
	KeyKeptPatchRetention:    DefaultKeptPatchRetention,
}

// Resolve reads the config file and the environment and applies the
// precedence flags > environment > file > defaults, then Validate. A
// config file named by --config or $CORRAL_CONFIG must exist; the default
// one may be absent. Errors wrap errdefs.ErrInvalidArgument (a file that
// does not decode: an *yamlstrict.Error naming file:line and key).
func Resolve(in Inputs) (Config, error) {
	getenv, readFile := in.Getenv, in.ReadFile
	if getenv == nil {
		getenv = os.Getenv
	}
	if readFile == nil {
		readFile = os.ReadFile
	}
	path, named := in.ConfigPath, true
	if path == "" {
		path = getenv("CORRAL_CONFIG")
	}
	if path == "" {
		path, named = DefaultPath, false
	}
	var file File
	cfg := Config{Sources: map[string]string{}}
	data, err := readFile(path)
	switch {
	case err == nil:
		if err := yamlstrict.Decode(path, data, &file); err != nil {
			return Config{}, err
		}
		cfg.File = path
	case errors.Is(err, fs.ErrNotExist) && !named:
	case errors.Is(err, fs.ErrNotExist):
		return Config{}, fmt.Errorf("config file %s: %w: it does not exist; create it or name another with --config or CORRAL_CONFIG", path, errdefs.ErrInvalidArgument)
	default:
		return Config{}, fmt.Errorf("reading config file %s: %w", path, err)
	}
	fromFile := map[string]string{
		KeyAddress: file.Address, KeyNamespace: file.Namespace, KeyStateDir: file.StateDir, KeyRuntime: file.Runtime,
		KeyImage: file.Image, KeyDaemonSocket: file.DaemonSocket, KeyLogLevel: file.LogLevel,
		KeyKubeletRoot: file.KubeletRoot,
	}
	if file.MaxSessions != nil {
		fromFile[KeyMaxSessions] = strconv.Itoa(*file.MaxSessions)
	}
	if file.MaxConnections != nil {
		fromFile[KeyMaxConnections] = strconv.Itoa(*file.MaxConnections)
	}
	fromFile[KeyMaxMemory] = file.MaxMemory
	fromFile[KeyMaxKeptPatchBytes] = file.MaxKeptPatchBytes
	fromFile[KeyKeptPatchRetention] = file.KeptPatchRetention
	if file.AllowForeignNamespace != nil {
		fromFile[KeyAllowForeignNamespace] = strconv.FormatBool(*file.AllowForeignNamespace)
	}
	get := func(key string) string {
		if v, ok := in.Flags[key]; ok {
			cfg.Sources[key] = "flag --" + strings.ReplaceAll(key, "_", "-")
			return v
		}
		for _, e := range env[key] {
			if v := getenv(e); v != "" {
				cfg.Sources[key] = "env " + e
				return v
			}
		}
		if v := fromFile[key]; v != "" {
			cfg.Sources[key] = "file " + path
			return v
		}
		cfg.Sources[key] = "default"
		return defaults[key]
	}
	cfg.Address = get(KeyAddress)
	cfg.Namespace = get(KeyNamespace)
	cfg.StateDir = get(KeyStateDir)
	cfg.Runtime = get(KeyRuntime)
	cfg.Image = get(KeyImage)
	cfg.DaemonSocket = get(KeyDaemonSocket)
	cfg.LogLevel = get(KeyLogLevel)
	cfg.KubeletRoot = get(KeyKubeletRoot)
	allow := get(KeyAllowForeignNamespace)
	b, err := strconv.ParseBool(allow)
	if err != nil {
		return Config{}, fmt.Errorf("%s %q: %w: want true or false", cfg.Sources[KeyAllowForeignNamespace], allow, errdefs.ErrInvalidArgument)
	}
	cfg.AllowForeignNamespace = b
	count := func(key string, min int) (int, error) {
		v := get(key)
		n, err := strconv.Atoi(v)
		if err != nil || n < min {
			return 0, fmt.Errorf("%s %q (%s): %w: want a whole number of at least %d", strings.ReplaceAll(key, "_", "-"), v, cfg.Sources[key], errdefs.ErrInvalidArgument, min)
		}
		return n, nil
	}
	if cfg.MaxSessions, err = count(KeyMaxSessions, 0); err != nil {
		return Config{}, err
	}
	if cfg.MaxConnections, err = count(KeyMaxConnections, 0); err != nil {
		return Config{}, err
	}
	mem := get(KeyMaxMemory)
	if cfg.MaxMemory, err = units.RAMInBytes(mem); err != nil || cfg.MaxMemory < 0 {
		return Config{}, fmt.Errorf("max-memory %q (%s): %w: want bytes or a size with a binary unit (8GiB, 512MiB), 0 for no cap", mem, cfg.Sources[KeyMaxMemory], errdefs.ErrInvalidArgument)
	}
	kept := get(KeyMaxKeptPatchBytes)
	if cfg.MaxKeptPatchBytes, err = units.RAMInBytes(kept); err != nil || cfg.MaxKeptPatchBytes < 0 {
		return Config{}, fmt.Errorf("max-kept-patch-bytes %q (%s): %w: want bytes or a size with a binary unit (256MiB, 1GiB), 0 for no cap", kept, cfg.Sources[KeyMaxKeptPatchBytes], errdefs.ErrInvalidArgument)
	}
	keep := get(KeyKeptPatchRetention)
	if cfg.KeptPatchRetention, err = time.ParseDuration(keep); err != nil || cfg.KeptPatchRetention < 0 {
		return Config{}, fmt.Errorf("kept-patch-retention %q (%s): %w: want a duration (168h, 30m), 0 to keep patches for ever", keep, cfg.Sources[KeyKeptPatchRetention], errdefs.ErrInvalidArgument)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// LogLevels are the log levels corral knows, least to most severe.
var LogLevels = []string{"debug", "info", "warn", "error"}

// foreign are the containerd namespaces of other engines, with whose.
var foreign = map[string]string{
	"moby":   "Docker's",
	"k8s.io": "Kubernetes' (the CRI plugin's)",
}

// Foreign returns whose namespace ns is ("Docker's"), or "" when it is
// no other engine's.
func Foreign(ns string) string { return foreign[ns] }

// Validate checks the resolved settings; each error is one line naming
// the setting's source and the fix, wrapping errdefs.ErrInvalidArgument.
func (c Config) Validate() error {
	for _, check := range []func(Config) error{checkLogLevel, checkStateDir, checkNamespace, checkKubeletRoot} {
		if err := check(c); err != nil {
			return err
		}
	}
	return nil
}

func checkLogLevel(c Config) error {
	if c.LogLevel == "" {
		return nil
	}
	for _, l := range LogLevels {
		if c.LogLevel == l {
			return nil
		}
	}
	return fmt.Errorf("log level %q (%s): %w: want one of %s", c.LogLevel, c.Sources[KeyLogLevel], errdefs.ErrInvalidArgument, strings.Join(LogLevels, ", "))
}

func checkStateDir(c Config) error {
	if !filepath.IsAbs(c.StateDir) {
		return fmt.Errorf("state directory %q (%s): %w: want an absolute path", c.StateDir, c.Sources[KeyStateDir], errdefs.ErrInvalidArgument)
	}
	return nil
}

// checkKubeletRoot wants the kubelet's root, when set, absolute and clean:
// Pod mode finds each Pod's volumes beneath it.
func checkKubeletRoot(c Config) error {
	if c.KubeletRoot == "" {
		return nil
	}
	if !filepath.IsAbs(c.KubeletRoot) || filepath.Clean(c.KubeletRoot) != c.KubeletRoot {
		return fmt.Errorf("kubelet root %q (%s): %w: want an absolute, clean path (the kubelet's --root-dir, default /var/lib/kubelet)", c.KubeletRoot, c.Sources[KeyKubeletRoot], errdefs.ErrInvalidArgument)
	}
	return nil
}

// checkNamespace refuses another engine's namespace unless allowed on
// purpose: corral's containers, images and leases would sit among that
// engine's, which lists, garbage-collects or prunes them as its own (and
// corral's gc would see the engine's).
func checkNamespace(c Config) error {
	whose := foreign[c.Namespace]
	if whose == "" || c.AllowForeignNamespace {
		return nil
	}
	return fmt.Errorf("namespace %q (%s): %w: it is %s, and corral's containers would mix with that engine's, which manages them as its own; use corral's own (default %q), or pass --allow-foreign-namespace (config allow_foreign_namespace: true) if you mean it",
		c.Namespace, c.Sources[KeyNamespace], errdefs.ErrInvalidArgument, whose, sandbox.DefaultNamespace)
}

// Keys returns the setting keys in a stable order.
func Keys() []string {
	keys := make([]string, 0, len(defaults))
	for k := range defaults {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
