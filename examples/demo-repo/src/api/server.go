package main

import (
	"encoding/json"
	"log"
	"net/http"
	"os"
)

// TODO: authenticate requests with the key from API_KEY.
func main() {
	http.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
	})
	addr := os.Getenv("LISTEN_ADDR")
	if addr == "" {
		addr = ":8080"
	}
	log.Fatal(http.ListenAndServe(addr, nil))
}
