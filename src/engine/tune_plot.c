/* One plain SVG a shape class from a `wisp tune` receipt (tune.h,
 * wisp_tune_write_plots): a bar per geometry, its median time, a whisker
 * for its spread (half the range of its rounds), the default in grey, the
 * chosen one in green, the rest in blue, failed or skipped ones as a note. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/tune.h"
#include "plan/pjson.h"
#include "util/err.h"
#include "util/file.h"

/* Text for an SVG element: & < > " escaped. */
static void esc(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '&') fputs("&amp;", f);
    else if (*s == '<') fputs("&lt;", f);
    else if (*s == '>') fputs("&gt;", f);
    else if (*s == '"') fputs("&quot;", f);
    else fputc(*s, f);
  }
}

static double num(const cJSON *o, const char *k) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsNumber(j) ? j->valuedouble : -1;
}

static const char *str(const cJSON *o, const char *k) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, k);
  return cJSON_IsString(j) ? j->valuestring : "";
}

/* The SVG of class c into an in-memory stream. */
static char *plot(const cJSON *c, const char *device, const char *timing, size_t *len) {
  char *buf = NULL;
  FILE *f = open_memstream(&buf, len);
  if (!f) return NULL;
  const cJSON *cs = cJSON_GetObjectItemCaseSensitive(c, "candidates");
  const int n = cJSON_GetArraySize(cs);
  double top = 0;
  for (const cJSON *x = cs ? cs->child : NULL; x; x = x->next) {
    const double m = num(x, "median_ns"), s = num(x, "spread");
    if (m > 0) top = fmax(top, m * (1 + fmax(s, 0)));
  }
  if (top <= 0) top = 1;
  const int bar = 36, gap = 14, left = 70, H = 260, base = 40 + H, W = left + n * (bar + gap) + 40;
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
             "font-size=\"11\">\n", W < 420 ? 420 : W, base + 90);
  fprintf(f, "<text x=\"10\" y=\"18\" font-size=\"14\">");
  esc(f, str(c, "class"));
  fprintf(f, " (%s", str(c, "geometry"));
  if (num(c, "rows") > 0) fprintf(f, ", %.0fx%.0f", num(c, "rows"), num(c, "cols"));
  fprintf(f, ")</text>\n<text x=\"10\" y=\"32\" fill=\"#555\">");
  esc(f, device);
  fprintf(f, "; ");
  esc(f, timing);
  fprintf(f, "; median time of one op, whisker: spread</text>\n");
  fprintf(f, "<line x1=\"%d\" y1=\"40\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>\n", left, left, base);
  fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>\n", left, base, W - 20, base);
  for (int t = 0; t <= 4; t++) { /* y axis in microseconds */
    const double v = top * t / 4;
    const int y = base - (int)(H * t / 4);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%.3g us</text>\n", left - 4, y + 4, v / 1e3);
  }
  const char *chosen = str(c, "chosen");
  int i = 0;
  for (const cJSON *x = cs ? cs->child : NULL; x; x = x->next, i++) {
    const int x0 = left + gap / 2 + i * (bar + gap);
    const double m = num(x, "median_ns"), s = num(x, "spread");
    const char *g = str(x, "geometry");
    const int is_def = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(x, "default"));
    if (m > 0) {
      const int h = (int)(H * m / top);
      const char *fill = !strcmp(g, chosen) ? "#2a9d4b" : is_def ? "#999" : "#4a78c2";
      fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>\n", x0, base - h, bar, h, fill);
      const int w = (int)(H * m * fmax(s, 0) / top);
      fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#000\"/>\n", x0 + bar / 2, base - h - w,
              x0 + bar / 2, base - h + w);
    } else {
      fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#a00\">-</text>\n", x0 + bar / 2, base - 4);
    }
    fprintf(f, "<text transform=\"translate(%d,%d) rotate(50)\">", x0 + 4, base + 12);
    esc(f, g);
    fprintf(f, "%s</text>\n", is_def ? " (default)" : "");
  }
  fprintf(f, "<text x=\"10\" y=\"%d\" fill=\"#555\">green: chosen", base + 84);
  if (num(c, "speedup") > 0) fprintf(f, " (%.2fx the default)", num(c, "speedup"));
  fprintf(f, "; grey: the default; -: failed or skipped (the receipt says why)</text>\n</svg>\n");
  fclose(f);
  return buf;
}

int wisp_tune_write_plots(const cJSON *receipt, const char *dir) {
  const cJSON *cls = cJSON_GetObjectItemCaseSensitive(receipt, "classes");
  const cJSON *dev = cJSON_GetObjectItemCaseSensitive(receipt, "device");
  char device[200];
  wisp_path(device, sizeof device, "%s (%s)", str(dev, "name"), str(dev, "driver"));
  int written = 0;
  for (const cJSON *c = cls ? cls->child : NULL; c; c = c->next) {
    char name[96], path[1200];
    wisp_path(name, sizeof name, "%s", str(c, "class"));
    for (char *p = name; *p; p++)
      if (*p == ':' || *p == '/' || *p == '.') *p = '-';
    wisp_path(path, sizeof path, "%s/tune-%s.svg", dir, name);
    size_t len = 0;
    char *svg = plot(c, device, str(receipt, "timing"), &len);
    if (!svg) {
      wisp_fail(WISP_ENOMEM, "out of memory");
      return -1;
    }
    wisp_status st = wisp_write_file_atomic(path, svg, len);
    free(svg);
    if (st) return -1;
    written++;
  }
  return written;
}
