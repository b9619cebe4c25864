package audit

import "context"

type peerKey struct{}

// ContextWithPeer returns ctx carrying p: a long-lived owner (the daemon)
// attaches its client's credentials to each request's context, and every
// record written for that request names p (see Logger.For).
func ContextWithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, peerKey{}, p)
}

// PeerFromContext returns the peer ContextWithPeer attached to ctx.
func PeerFromContext(ctx context.Context) (Peer, bool) {
	p, ok := ctx.Value(peerKey{}).(Peer)
	return p, ok
}

// For returns l naming the peer that ctx carries (ContextWithPeer), or l
// itself when ctx carries none. A nil Logger stays nil.
func (l *Logger) For(ctx context.Context) *Logger {
	if p, ok := PeerFromContext(ctx); ok {
		return l.WithPeer(p)
	}
	return l
}
