package chaos

import (
	"fmt"
	"os"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// drawSoak draws the soak's samples as six panels in one PNG, the end of
// the warm-up dashed.
func drawSoak(path, store string, rows []soakSampleRow, warm time.Duration, rate float64, dur time.Duration) error {
	type panel struct {
		title  string
		series map[string]func(soakSampleRow) float64
	}
	panels := []panel{
		{"RSS (MB)", map[string]func(soakSampleRow) float64{"rss": func(r soakSampleRow) float64 { return r.rssMB }}},
		{"goroutines", map[string]func(soakSampleRow) float64{"goroutines": func(r soakSampleRow) float64 { return float64(r.goroutines) }}},
		{"open files", map[string]func(soakSampleRow) float64{"fds": func(r soakSampleRow) float64 { return float64(r.openFiles) }}},
		{"database connections", map[string]func(soakSampleRow) float64{"conns": func(r soakSampleRow) float64 { return float64(r.dbConns) }}},
		{"store size (MB)", map[string]func(soakSampleRow) float64{"size": func(r soakSampleRow) float64 { return r.storeMB }}},
		{"request latency (ms)", map[string]func(soakSampleRow) float64{
			"p50": func(r soakSampleRow) float64 { return r.p50ms }, "p99": func(r soakSampleRow) float64 { return r.p99ms }}},
	}
	const cols, rowsN = 2, 3
	img := vgimg.New(vg.Points(900), vg.Points(900))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rowsN, Cols: cols, PadTop: vg.Points(30), PadX: vg.Points(10), PadY: vg.Points(10), PadBottom: vg.Points(5), PadLeft: vg.Points(5), PadRight: vg.Points(5)}
	plots := make([][]*plot.Plot, rowsN)
	for i, pn := range panels {
		p := plot.New()
		p.Title.Text = pn.title
		p.X.Label.Text = "minutes"
		var args []any
		for _, name := range []string{"rss", "goroutines", "fds", "conns", "size", "p50", "p99"} {
			get, ok := pn.series[name]
			if !ok {
				continue
			}
			pts := make(plotter.XYs, len(rows))
			for j, r := range rows {
				pts[j].X, pts[j].Y = r.at.Minutes(), get(r)
			}
			args = append(args, name, pts)
		}
		if err := plotutil.AddLines(p, args...); err != nil {
			return err
		}
		if i == 0 {
			p.Title.Text = fmt.Sprintf("%s store, %.1f workflows/s for %s: %s", store, rate, dur, pn.title)
		}
		// The end of the warm-up.
		wl, err := plotter.NewLine(plotter.XYs{{X: warm.Minutes(), Y: p.Y.Min}, {X: warm.Minutes(), Y: p.Y.Max}})
		if err == nil {
			wl.Dashes = []vg.Length{vg.Points(4), vg.Points(4)}
			p.Add(wl)
		}
		if plots[i/cols] == nil {
			plots[i/cols] = make([]*plot.Plot, cols)
		}
		plots[i/cols][i%cols] = p
	}
	canvases := plot.Align(plots, tiles, dc)
	for r := range rowsN {
		for c := range cols {
			if plots[r][c] != nil {
				plots[r][c].Draw(canvases[r][c])
			}
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
