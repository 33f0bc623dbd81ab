package sandbox

import (
	"fmt"
	"os"
	"strconv"
)

// preferOOMKill sets oom_score_adj to the maximum (1000) on the blocked
// sandbox child and bwrap before release; everything the step starts
// inherits it. Without CAP_SYS_RESOURCE no floor can be set, so a hostile
// step may lower it to 0 again: the step's memory cgroup is the real bound.
func preferOOMKill(pids ...int) error {
	for _, pid := range pids {
		p := "/proc/" + strconv.Itoa(pid) + "/oom_score_adj"
		if err := os.WriteFile(p, []byte("1000"), 0); err != nil {
			return fmt.Errorf("set oom_score_adj of pid %d: %w", pid, err)
		}
	}
	return nil
}
