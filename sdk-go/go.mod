module github.com/iwf-server/iwf-server/sdk-go

go 1.26.8
