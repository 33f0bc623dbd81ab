package github

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	gh "github.com/google/go-github/v66/github"

	"vouch.dev/vouch/forge"
)

// CreateComment posts a comment on a pull request (POST
// /repos/{o}/{r}/issues/{n}/comments), its body capped by capComment.
func (c *Client) CreateComment(ctx context.Context, repo forge.Repo, number int, body string) (forge.Comment, error) {
	body = capComment(body)
	var ic *gh.IssueComment
	err := c.call(ctx, fmt.Sprintf("comment on %s#%d", repo.FullName(), number), func(ctx context.Context) (err error) {
		ic, _, err = c.gh.Issues.CreateComment(ctx, repo.Owner, repo.Name, number, &gh.IssueComment{Body: &body})
		return err
	})
	if err != nil {
		return forge.Comment{}, err
	}
	return commentOf(ic), nil
}

// EditComment replaces a comment's body (PATCH
// /repos/{o}/{r}/issues/comments/{id}), capped like CreateComment's.
func (c *Client) EditComment(ctx context.Context, repo forge.Repo, id int64, body string) error {
	body = capComment(body)
	return c.call(ctx, fmt.Sprintf("edit comment %d in %s", id, repo.FullName()), func(ctx context.Context) error {
		_, _, err := c.gh.Issues.EditComment(ctx, repo.Owner, repo.Name, id, &gh.IssueComment{Body: &body})
		return err
	})
}

// BotComments lists the comments the bot's login made on a pull request,
// oldest first, every page.
func (c *Client) BotComments(ctx context.Context, repo forge.Repo, number int) ([]forge.Comment, error) {
	login, err := c.botLogin(ctx)
	if err != nil {
		return nil, err // "github: get authenticated user: ..."
	}
	op := fmt.Sprintf("list comments on %s#%d", repo.FullName(), number)
	opts := &gh.IssueListCommentsOptions{ListOptions: gh.ListOptions{PerPage: perPage}}
	var out []forge.Comment
	for page := 0; ; page++ {
		if page == maxPages {
			return nil, fmt.Errorf("github: %s: more than %d pages", op, maxPages)
		}
		var ics []*gh.IssueComment
		var resp *gh.Response
		err := c.call(ctx, op, func(ctx context.Context) (err error) {
			ics, resp, err = c.gh.Issues.ListComments(ctx, repo.Owner, repo.Name, number, opts)
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, ic := range ics {
			if strings.EqualFold(ic.GetUser().GetLogin(), login) {
				out = append(out, commentOf(ic))
			}
		}
		if resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	// GitHub lists oldest first; ids grow with time, so make sure of it.
	slices.SortStableFunc(out, func(a, b forge.Comment) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func commentOf(ic *gh.IssueComment) forge.Comment {
	return forge.Comment{ID: ic.GetID(), Author: ic.GetUser().GetLogin(), Body: ic.GetBody()}
}

// capComment keeps a body within forge.MaxCommentBody characters (runes,
// as GitHub counts them). A longer body keeps its head intact, closes a
// code fence left open by the cut, and ends with a note saying how much
// was cut.
func capComment(body string) string {
	n := utf8.RuneCountInString(body)
	if n <= forge.MaxCommentBody {
		return body
	}
	const fence = "\n```"
	// Room for the note with the widest count it can show, and a fence.
	reserve := utf8.RuneCountInString(truncationNote(n)) + len(fence)
	keep := forge.MaxCommentBody - reserve
	cut := len(body)
	i := 0
	for off := range body {
		if i == keep {
			cut = off
			break
		}
		i++
	}
	head := body[:cut]
	if openFence(head) {
		head += fence
	}
	return head + truncationNote(n-keep)
}

func truncationNote(omitted int) string {
	return fmt.Sprintf("\n\n… (truncated by vouch: %d more characters not shown)", omitted)
}

// openFence reports whether s ends inside a ``` code block.
func openFence(s string) bool {
	open := false
	for line := range strings.Lines(s) {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			open = !open
		}
	}
	return open
}
