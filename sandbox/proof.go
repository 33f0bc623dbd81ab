package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// maxAncestry bounds the PPid walk from the reported child to bwrap.
const maxAncestry = 8

// readChildPid decodes the first JSON object bwrap writes to --info-fd and
// returns its "child-pid". It reads at most 4 KiB.
func readChildPid(r io.Reader) (int, error) {
	var info struct {
		ChildPid *int `json:"child-pid"`
	}
	if err := json.NewDecoder(io.LimitReader(r, 4096)).Decode(&info); err != nil {
		return 0, fmt.Errorf("read bwrap info: %w", err)
	}
	if info.ChildPid == nil || *info.ChildPid <= 1 {
		return 0, errors.New("read bwrap info: no valid child-pid")
	}
	return *info.ChildPid, nil
}

// parentPid returns the PPid of pid from /proc/<pid>/status.
func parentPid(pid int) (int, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PPid:"); ok {
			ppid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return 0, fmt.Errorf("parse PPid of pid %d: %w", pid, err)
			}
			return ppid, nil
		}
	}
	return 0, fmt.Errorf("status of pid %d has no PPid", pid)
}

// checkDescendant verifies that child's parent chain reaches ancestor, so the
// pid the provider reported is really a process the provider started.
func checkDescendant(child, ancestor int) error {
	pid := child
	for range maxAncestry {
		ppid, err := parentPid(pid)
		if err != nil {
			return err
		}
		if ppid == ancestor {
			return nil
		}
		if ppid <= 1 {
			break
		}
		pid = ppid
	}
	return fmt.Errorf("reported child pid %d is not a descendant of bwrap (pid %d)", child, ancestor)
}

// namespaceLinks reads /proc/<who>/ns/<kind> for every kind in Namespaces;
// who is a pid or "self".
func namespaceLinks(who string) (map[string]string, error) {
	links := make(map[string]string, len(Namespaces))
	for _, kind := range Namespaces {
		l, err := os.Readlink("/proc/" + who + "/ns/" + kind)
		if err != nil {
			return nil, fmt.Errorf("read %s namespace of %s: %w", kind, who, err)
		}
		links[kind] = l
	}
	return links, nil
}

// compareNamespaces pairs the host's and the child's namespaces and fails
// with a *ProofError naming the first kind they share (or that could not be
// read); the error carries every pair observed, as evidence.
func compareNamespaces(host, child map[string]string) (map[string]NamespacePair, *ProofError) {
	pairs := make(map[string]NamespacePair, len(Namespaces))
	var perr *ProofError
	for _, kind := range Namespaces {
		h, c := host[kind], child[kind]
		pairs[kind] = NamespacePair{Host: h, Child: c}
		if perr != nil {
			continue
		}
		if h == "" || c == "" {
			perr = &ProofError{Namespace: kind, Host: h, Child: c, Cause: kind + " namespace unreadable"}
		} else if h == c {
			perr = &ProofError{Namespace: kind, Host: h, Child: c, Cause: kind + " namespace shared with host"}
		}
	}
	if perr != nil {
		perr.Observed = pairs
		return nil, perr
	}
	return pairs, nil
}
