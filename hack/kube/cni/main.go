//go:build linux

// Command corral-cni is the test cluster's stub CNI plugin: it gives a Pod
// no network at all, only an address to report, so that Pods without
// hostNetwork run on a node that has no real Pod network.
//
// It follows the CNI specification (github.com/containernetworking/cni,
// SPEC.md): the command comes in CNI_COMMAND, the network configuration on
// stdin, the result or a JSON error on stdout.
//
// Installed under two names in the CNI bin directory:
//
//   - "loopback": containerd's CRI always attaches its own loopback network
//     ({"type":"loopback"}) before the configured one. As the reference
//     plugin does, it sets lo up in the Pod's network namespace.
//   - "corral-cni": the configured network. ADD creates nothing and reports
//     one address taken from the config's "subnet" (default 198.19.0.0/16),
//     picked by a hash of CNI_CONTAINERID, on an interface named CNI_IFNAME
//     (containerd looks the Pod IP up under "eth0"). The address exists
//     nowhere: the Pod's namespace holds only lo.
//
// DEL, CHECK, GC and STATUS succeed with no output; VERSION lists the spec
// versions whose result format it writes.
package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"net/netip"
	"os"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

var supported = []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"}

type netConf struct {
	CNIVersion string `json:"cniVersion"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Subnet     string `json:"subnet"`
}

type cniError struct {
	CNIVersion string `json:"cniVersion"`
	Code       int    `json:"code"`
	Msg        string `json:"msg"`
}

func main() {
	version := "1.0.0"
	if err := run(os.Stdin, os.Stdout, &version); err != nil {
		// Error codes from 100 up are the plugin's own (SPEC.md, "Error").
		_ = json.NewEncoder(os.Stdout).Encode(cniError{CNIVersion: version, Code: 100, Msg: err.Error()})
		os.Exit(1)
	}
}

func run(stdin io.Reader, stdout io.Writer, version *string) error {
	cmd := os.Getenv("CNI_COMMAND")
	if cmd == "VERSION" {
		return json.NewEncoder(stdout).Encode(map[string]any{
			"cniVersion": "1.0.0", "supportedVersions": supported,
		})
	}
	var conf netConf
	raw, err := io.ReadAll(stdin)
	if err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	if err := json.Unmarshal(raw, &conf); err != nil {
		return fmt.Errorf("parsing config: %w", err)
	}
	if conf.CNIVersion != "" {
		*version = conf.CNIVersion
	}
	switch cmd {
	case "ADD":
	case "DEL", "CHECK", "GC", "STATUS":
		return nil
	default:
		return fmt.Errorf("unknown CNI_COMMAND %q", cmd)
	}

	netns := os.Getenv("CNI_NETNS")
	ifname := os.Getenv("CNI_IFNAME")
	var addr string
	if conf.Type == "loopback" {
		if err := loUp(netns); err != nil {
			return err
		}
		ifname, addr = "lo", "127.0.0.1/8"
	} else {
		if addr, err = pick(conf.Subnet, os.Getenv("CNI_CONTAINERID")); err != nil {
			return err
		}
	}
	ip := map[string]any{"address": addr, "interface": 0}
	if strings.HasPrefix(*version, "0.") {
		ip["version"] = "4" // 0.3.x and 0.4.0 results name the family
	}
	return json.NewEncoder(stdout).Encode(map[string]any{
		"cniVersion": *version,
		"interfaces": []map[string]any{{"name": ifname, "sandbox": netns}},
		"ips":        []map[string]any{ip},
	})
}

// pick returns an address in subnet (CIDR, IPv4) chosen by a hash of id,
// never the network or broadcast address, in CIDR notation with the
// subnet's prefix length.
func pick(subnet, id string) (string, error) {
	if subnet == "" {
		subnet = "198.19.0.0/16"
	}
	p, err := netip.ParsePrefix(subnet)
	if err != nil || !p.Addr().Is4() || p.Bits() > 30 {
		return "", fmt.Errorf("subnet %q: want an IPv4 CIDR of /30 or wider", subnet)
	}
	p = p.Masked()
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	hosts := uint32(1)<<(32-p.Bits()) - 2
	base := p.Addr().As4()
	n := binary.BigEndian.Uint32(base[:]) + 1 + h.Sum32()%hosts
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], n)
	return netip.PrefixFrom(netip.AddrFrom4(out), p.Bits()).String(), nil
}

// loUp sets the loopback interface of the network namespace at path up, like
// the reference loopback plugin. The OS thread that enters the namespace is
// never unlocked: the Go runtime ends it with the process.
func loUp(path string) error {
	runtime.LockOSThread()
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening netns %q: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("entering netns %q: %w", path, err)
	}
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket in netns: %w", err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("reading lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("setting lo up: %w", err)
	}
	return nil
}
