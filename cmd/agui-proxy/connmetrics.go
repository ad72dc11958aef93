package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agui-proxy/agui-proxy/keepalive"
)

// registerKeepAlive exports what the keepalive.Listener did with the connections of the
// streams the proxy took over, read at each scrape: how many were handed back at their
// stream's end, how many carried another request of their client, and how many wait for one.
func registerKeepAlive(reg prometheus.Registerer, l *keepalive.Listener) {
	reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "agui_proxy_connections_returned_total",
			Help: "Client connections the proxy took over for a stream and handed back to the server at the stream's clean end, to wait for the client's next request (AGUI_IDLE_TIMEOUT at most).",
		}, func() float64 { return float64(l.Stats().Returned) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "agui_proxy_connections_reused_total",
			Help: "Connections handed back that carried another request of their client (the rest were closed: idle too long, or the client left).",
		}, func() float64 { return float64(l.Stats().Reused) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "agui_proxy_connections_waiting",
			Help: "Connections handed back that wait for their client's next request now.",
		}, func() float64 { return float64(l.Stats().Waiting) }),
	)
}
