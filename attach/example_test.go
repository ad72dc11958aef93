package attach_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"

	"github.com/agui-proxy/agui-proxy/attach"
	"github.com/agui-proxy/agui-proxy/recorder"
	"github.com/agui-proxy/agui-proxy/thread"
)

// epoch matches the epoch in a cursor (random per run), so the output below is stable.
var epoch = regexp.MustCompile(`("r1:)[0-9a-z]+:`)

// A Handler serves the attach endpoints of the threads in a store. Here a thread comes in
// through import; a thread attach then sends its compacted history (starting with
// RUN_STARTED, ending with the replay_complete marker before the terminal event), and the
// history endpoint its messages as JSON. An unknown thread is a problem document.
func Example() {
	store := recorder.NewMemoryStore(recorder.MemoryConfig{})
	defer store.Close()
	threads, _ := thread.New(thread.Config{Store: store})
	h, err := attach.New(attach.Config{Threads: threads})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	doc := `{"formatVersion":1,"threadId":"t1","runs":[{"runId":"r1","status":"finished","eventList":[
		{"type":"RUN_STARTED","threadId":"t1","runId":"r1"},
		{"type":"TEXT_MESSAGE_START","messageId":"m1","role":"assistant"},
		{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"Hel"},
		{"type":"TEXT_MESSAGE_CONTENT","messageId":"m1","delta":"lo"},
		{"type":"TEXT_MESSAGE_END","messageId":"m1"},
		{"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}]}]}`
	res, err := http.Post(srv.URL+"/agui/threads/t1/import", "application/json", strings.NewReader(doc))
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()
	fmt.Println("import:", res.StatusCode)

	res, err = http.Get(srv.URL + "/agui/threads/t1/events")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("attach:", res.StatusCode, res.Header.Get("Content-Type"))
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			fmt.Println(epoch.ReplaceAllString(data, "$1<epoch>:"))
		}
	}
	res.Body.Close()

	for _, path := range []string{"/agui/threads/t1", "/agui/threads/nope"} {
		res, err = http.Get(srv.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		fmt.Println(path+":", res.StatusCode, res.Header.Get("Content-Type"))
		fmt.Println(strings.TrimSpace(string(body)))
	}
	// Output:
	// import: 201
	// attach: 200 text/event-stream
	// {"type":"RUN_STARTED","threadId":"t1","runId":"r1"}
	// {"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m1","role":"assistant","content":"Hello"}]}
	// {"type":"CUSTOM","name":"agui-proxy.replay_complete","value":{"cursor":"r1:<epoch>:6","live":false}}
	// {"type":"RUN_FINISHED","threadId":"t1","runId":"r1"}
	// /agui/threads/t1: 200 application/json
	// {"threadId":"t1","runId":"r1","status":"finished","messages":[{"id":"m1","role":"assistant","content":"Hello"}],"state":{}}
	// /agui/threads/nope: 404 application/problem+json
	// {"type":"urn:agui-proxy:problem:ThreadNotFound","title":"Thread not found","status":404,"code":"ThreadNotFound"}
}
