package attach_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// A Handler serves the attach endpoints of the threads in a store: here the runs tree of a
// thread with one finished run.
func Example() {
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	defer store.Close()
	ctx := context.Background()
	threads, _ := thread.New(thread.Config{Store: store})
	run, _ := threads.StartRun(ctx, recorder.Run{ThreadID: "t1", RunID: "r1"})
	store.FinishRun(ctx, run.ThreadID, run.RunID, recorder.StatusFinished, "", 0)

	h, err := attach.New(attach.Config{Threads: threads})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	res, err := http.Get(srv.URL + "/agui/threads/t1/runs")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	fmt.Println(res.StatusCode, res.Header.Get("Content-Type"))
	fmt.Println(len(body) > 0)
	res2, _ := http.Get(srv.URL + "/agui/threads/nope/runs")
	res2.Body.Close()
	fmt.Println(res2.StatusCode, res2.Header.Get("Content-Type"))
	// Output:
	// 200 application/json
	// true
	// 404 application/problem+json
}
