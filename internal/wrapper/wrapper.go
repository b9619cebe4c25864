// Package wrapper is the contract between corral and corral-runsc, its
// wrapper for OCI runtimes that need global flags under containerd's runc
// v2 shim (see cmd/corral-runsc): the program's name and the
// configuration file it reads from its own directory. Pure; no cgo.
package wrapper

// Name is the wrapper program's name (cmd/corral-runsc).
const Name = "corral-runsc"

// ConfigName is the wrapper's configuration file, in the directory of the
// wrapper's own executable.
const ConfigName = Name + ".json"

// Config is the wrapper's configuration: the runtime it runs and the
// global flags it puts before the shim's arguments.
type Config struct {
	// Runtime is the absolute path of the OCI runtime binary.
	Runtime string `json:"runtime"`
	// Flags are the runtime's global flags, such as "--network=none".
	Flags []string `json:"flags"`
}
