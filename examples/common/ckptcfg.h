/* ckptcfg.h - a wt2_train checkpoint's trn_config, rebuilt from its "attnkit.config"
   metadata (the JSON of every option): the programs that load a checkpoint to use its
   weights (mcqa, generate) read its architecture here, one copy for all of them.
   Static, for the programs' own translation units; needs ckpt.h, mcqa.h (its JSON
   parser) and train.h (trn_preset, trn_parse_flag) included before it. */
#ifndef ATTNKIT_CKPTCFG_H
#define ATTNKIT_CKPTCFG_H

#include <stdio.h>
#include <string.h>

/* cfg from checkpoint f: 0, or -1 with a sentence in err. prog names the program in the
   note about an option this build does not know (ignored). The run's own settings, not
   properties of the weights, are skipped: where it ran (device, precision: a checkpoint of
   either device loads on either), threads, paths. */
static int ex_config_from_ckpt(const ckpt_file *f, trn_config *cfg, const char *prog, char *err, size_t errlen)
{
    const char *js = ckpt_meta(f, "attnkit.config"), *kind = ckpt_meta(f, "attnkit.kind");
    mcqa_json *j = NULL;
    char jerr[256];
    int i;
    if (!kind || strcmp(kind, "wt2_train")) {
        snprintf(err, errlen, "not a wt2_train checkpoint (attnkit.kind is %s)", kind ? kind : "absent");
        return -1;
    }
    if (!js || mcqa_json_parse(js, strlen(js), &j, jerr, sizeof jerr) != MCQA_OK || j->type != MCQA_JOBJ) {
        snprintf(err, errlen, "the checkpoint's attnkit.config is missing or not a JSON object%s%s",
                 js ? ": " : "", js ? jerr : "");
        mcqa_json_free(j);
        return -1;
    }
    trn_preset("tiny", cfg);
    for (i = 0; i < j->n; i++) {
        const char *k = j->keys[i];
        const mcqa_json *v = j->items[i];
        char flag[128], *argv[3];
        int rc;
        if (!strcmp(k, "threads") || !strcmp(k, "data-dir") || !strcmp(k, "out-dir") || !strcmp(k, "device") ||
            !strcmp(k, "precision"))
            continue;
        if (v->type != MCQA_JSTR && v->type != MCQA_JNUM) continue;
        if (!strcmp(k, "cg-lengths") && v->len == 0) { cfg->n_cg = 0; continue; }
        snprintf(flag, sizeof flag, "--%s", k);
        argv[0] = (char *)prog;
        argv[1] = flag;
        argv[2] = v->str;
        rc = trn_parse_flag(cfg, 3, argv, 1, err, errlen);
        if (rc < 0) { mcqa_json_free(j); return -1; }
        if (rc == 0) fprintf(stderr, "%s: note: checkpoint option --%s is unknown to this build (ignored)\n", prog, k);
    }
    mcqa_json_free(j);
    return 0;
}

#endif
