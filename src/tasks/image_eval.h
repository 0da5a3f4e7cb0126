/*
 * image_eval.h - `winml eval --mode task` of an image-classification build folder: top-1 and top-5 accuracy and
 * F1 (macro over the classes; binary for two) over a labelled image set:
 *   - an image folder DIR/<class>/<image>.png|jpg|jpeg (torchvision's ImageFolder layout), classes and files in
 *     name order, taken round-robin over the classes so that the first --samples cover every class; or
 *   - a table (CSV, TSV, JSONL) with an image column (image, image_path, path, file, filename; or the text
 *     column flag) of paths relative to the table's folder, and a label column (label, labels, class; or the
 *     label column flag).
 * A label is a name of config.json's id2label (exact, else ignoring case) or a class id; anything else is an
 * error naming the file and line (or the class folder). Each image is decoded, preprocessed and run as
 * `winml run --image` does (tasks/vision.h).
 *
 * A CLIP-style build (zero-shot-image-classification: input_ids + pixel_values -> logits_per_image) gets
 * image-text retrieval instead: a table of image paths (image column as above, or the image column flag) and
 * captions (caption, text, sentence, captions; or the caption column flag), at most WM_RETRIEVAL_MAX_PAIRS rows.
 * The distinct images (in order of first appearance; an image on several rows owns all their captions) and all
 * captions (cut to the text tower's length, as CLIPProcessor's truncation=True) give the similarity matrix
 * logits_per_image; recall@1/5/10 and mean rank (1-based, ties broken by row order) image -> text (the best-placed
 * own caption) and text -> image.
 */
#ifndef WM_TASKS_IMAGE_EVAL_H
#define WM_TASKS_IMAGE_EVAL_H

#include "core/json.h"
#include "tasks/task_eval.h"

/* Writes "task", "dataset", "dataset_layout" and "metrics" {samples, accuracy, top5_accuracy, f1, f1_average} into the
 * open object j; retrieval: "metrics" {samples, images, captions, max_caption_tokens, image_to_text {recall@1,
 * recall@5, recall@10, mean_rank}, text_to_image {...}}. */
wm_status wm_image_task_eval(const char *build_dir, const wm_task_opts *o, wm_json *j, wm_error *err);

#endif
