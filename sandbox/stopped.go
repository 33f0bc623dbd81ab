package sandbox

import (
	"bytes"
	"os"
	"strconv"
	"time"
)

// waitStopped polls until pid is stopped (state T or t), a zombie or gone,
// or the deadline passes; it reports whether it saw one of those.
func waitStopped(pid int, deadline time.Time) bool {
	for {
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true // gone
		}
		// The state follows the command name, which ends at the last ')'.
		if i := bytes.LastIndexByte(data, ')'); i >= 0 && i+2 < len(data) {
			switch data[i+2] {
			case 'T', 't', 'Z', 'X':
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Microsecond)
	}
}
