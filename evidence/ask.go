package evidence

import (
	"fmt"
	"strings"
)

// Ask is what a STOP_AND_ASK receipt asks of a human: the decision needed,
// who may give it and the exact reply that gives it. Every field is one line
// of inert text, bounded, so it can go in a machine-parseable block.
type Ask struct {
	// Decision is what must be decided.
	Decision string
	// Who is who may decide.
	Who string
	// Reply is the exact comment that gives the decision, or, when no comment
	// can, "none: " and what has to happen instead.
	Reply string
	// Sentence says the same for a human, in one sentence of Markdown that
	// holds no text from the pull request.
	Sentence string
}

// Bounds of the parts of an Ask, so that the block never needs trimming.
const (
	maxAskDetail = 1000
	maxAskPaths  = 10
	maxAskPath   = 200
)

// The people an Ask names.
const (
	whoMaintainer = "a maintainer with write access"
	whoAuthor     = "the pull request's author, or a maintainer with write access"
)

// AskFor returns what rc asks of a maintainer; ok is false unless rc's
// outcome is STOP_AND_ASK.
func AskFor(rc Receipt) (a Ask, ok bool) {
	if rc.Outcome != StopAndAsk {
		return Ask{}, false
	}
	short := shortSHA(rc.Head)
	switch rc.Reason {
	case ReasonProtectedPathChanged:
		a = Ask{
			Decision: "this PR changes vouch's trusted tooling; it will not be executed",
			Who:      whoMaintainer,
			Reply:    "none: no command unlocks this; a maintainer must land the tooling change through their own branch, then comment /verify here",
			Sentence: "This pull request touches protected paths, and vouch never executes a pull request's edit of its own verification tooling: a maintainer has to land that change through their own branch, after which this pull request can be verified against the new base.",
		}
	case ReasonNoTrustedRecipe:
		a = Ask{
			Decision: "the base commit has no .vouch.yml, so there is no trusted recipe to run (a recipe added by this PR is not trusted)",
			Who:      whoMaintainer,
			Reply:    "none: a maintainer adds .vouch.yml to the base branch through their own commit, then comments /verify here",
			Sentence: "vouch reads the recipe only from the base branch, which has none, so nothing was run; a maintainer must add .vouch.yml to the base branch through their own commit.",
		}
	case ReasonInvalidRecipe:
		a = Ask{
			Decision: "the base branch's .vouch.yml is invalid and must be fixed: " + oneLine(rc.Detail, maxAskDetail),
			Who:      whoMaintainer,
			Reply:    "none: a maintainer fixes .vouch.yml on the base branch through their own commit, then comments /verify here",
			Sentence: "The base branch's recipe could not be parsed, so nothing was run; a maintainer must fix .vouch.yml on the base branch.",
		}
	case ReasonUnsafeTree:
		a = Ask{
			Decision: "this head contains entries vouch will not check out: " + pathList(rc.Gate.Violations),
			Who:      whoAuthor,
			Reply:    "none: push a head without the entries DECISION lists; vouch verifies the new head",
			Sentence: "The head contains entries that could escape or bloat the workspace (symlinks out of the tree, submodules, unsafe paths or an oversized tree), so it was not checked out; the offending entries must be removed.",
		}
	case ReasonUntrustedAuthor:
		a = Ask{
			Decision: "the author is not trusted to run code here; may head " + short + " run in the sandbox?",
			Who:      whoMaintainer,
			Reply:    "/verify approve " + short,
			Sentence: "The author of this pull request is not trusted to run code on vouch; a maintainer who has read head " + short + " can approve exactly that commit with `/verify approve " + short + "`, and the approval lapses on the next push.",
		}
	default:
		a = Ask{
			Decision: fmt.Sprintf("vouch stopped with %s: %s", oneLine(string(rc.Reason), 100), oneLine(rc.Detail, maxAskDetail)),
			Who:      whoMaintainer,
			Reply:    "/verify",
			Sentence: "vouch stopped without running anything; a maintainer decides whether to verify again.",
		}
	}
	return a, true
}

// pathList names at most maxAskPaths violating paths, inert and bounded.
func pathList(vs []Violation) string {
	if len(vs) == 0 {
		return "no paths recorded"
	}
	var parts []string
	for i, v := range vs {
		if i == maxAskPaths {
			parts = append(parts, fmt.Sprintf("and %d more", len(vs)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", oneLine(v.Path, maxAskPath), oneLine(v.Rule, maxAskPath)))
	}
	return strings.Join(parts, ", ")
}

// lines returns the block's key=value lines, without OUTCOME and REASON.
func (a Ask) lines(executed bool) []string {
	return []string{
		"DECISION=" + a.Decision,
		"WHO=" + a.Who,
		"REPLY=" + a.Reply,
		"EXECUTED=" + yesNo(executed, "YES", "NO"),
	}
}

// yesNo returns yes when b, else no.
func yesNo(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}
