package mattermost

import (
	"net/url"
	"strconv"
)

// Paging limits (server/channels/web/params.go: PerPageDefault 60,
// PerPageMaximum 200; a page or per_page that is not a number, or
// negative, is invalid_url_param).
const (
	perPageDefault = 60
	perPageMaximum = 200
)

// getChannelPage is getPostsForChannel without since: app/post.go
// GetPostsPage over store/sqlstore/post_store.go GetPosts, collapsed
// threads off: the channel's posts not deleted, newest first, offset
// page*per_page, at most per_page (over the maximum is cut to it), with
// the roots of the replies among them added to posts (not to order) as
// the store's thread fetch does; prev_post_id and next_post_id are left
// empty (fake: AddCursorIdsForPostList not modelled). Caller holds s.mu.
func (s *Server) getChannelPage(ch *Channel, q url.Values) (int, any, error) {
	page, perPage := 0, perPageDefault
	for _, p := range []struct {
		name string
		v    *int
	}{{"page", &page}, {"per_page", &perPage}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return 0, nil, newAppError(400, "api.context.invalid_url_param.app_error", "Invalid or missing "+p.name+" parameter in request URL.")
			}
			*p.v = n
		}
	}
	perPage = min(perPage, perPageMaximum)
	var all []*Post
	for i := len(s.order) - 1; i >= 0; i-- {
		if p := s.posts[s.order[i]]; p.ChannelID == ch.ID && p.DeleteAt == 0 {
			all = append(all, p)
		}
	}
	l := &postList{Order: []string{}, Posts: map[string]*Post{}}
	for i := page * perPage; i < len(all) && i < (page+1)*perPage; i++ {
		l.Order = append(l.Order, all[i].ID)
		l.Posts[all[i].ID] = all[i]
	}
	for _, p := range l.Posts {
		if p.RootID != "" && l.Posts[p.RootID] == nil {
			l.Posts[p.RootID] = s.posts[p.RootID]
		}
	}
	return 200, snap(l), nil
}
