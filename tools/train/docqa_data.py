"""The synthetic document-QA task: documents of records about people (codes, cities, jobs,
ages, in varied sentence templates) among distractor records and plain filler sentences,
followed by questions whose answers are spans of the document. Everything is drawn from the
word lists and templates of models/yoco-docqa-tiny/docqa_task.json with an explicit seed, so
a batch is reproducible from (seed, step).

Byte tokens: model id = byte + 4, BOS = 0, PAD = 1, EOS = 2 (the engine's ByteTokenizer).
"""

import json
import random

BOS, PAD, EOS, OFFSET = 0, 1, 2, 4


def encode(text):
    return [b + OFFSET for b in text.encode()]


class DocQaTask:
    def __init__(self, path):
        with open(path) as f:
            self.t = json.load(f)
        self.relations = sorted(self.t["relations"])

    def value(self, rng, relation):
        if relation == "code":
            return str(rng.randint(1000, 9999))
        if relation == "age":
            return str(rng.randint(18, 89))
        return rng.choice(self.t["cities" if relation == "city" else "jobs"])

    def filler(self, rng):
        s = rng.choice(self.t["filler"])
        for key, words in (("city", "cities"), ("weather", "weather"), ("activity", "activity"),
                           ("day", "day"), ("adjective", "adjective")):
            s = s.replace("{" + key + "}", rng.choice(self.t[words]))
        return s

    def fact(self, rng, relation, name, value):
        return rng.choice(self.t["relations"][relation]["facts"]).format(name=name, value=value)

    def document(self, rng, length, needle=None, depth=None, record_share=0.6):
        """A document of about `length` bytes (sentences joined by spaces, never longer).
        Returns (text, records): records are (relation, name, value, sentence start). With
        `needle` = (relation, name, value), that fact is placed at `depth` (0..1) of the text
        and no other sentence states the same relation for that name."""
        people = [f + " " + l for f in self.t["first_names"] for l in self.t["last_names"]]
        rng.shuffle(people)
        taken = set()
        if needle is not None:
            taken.add((needle[0], needle[1]))
            needle_text = self.fact(rng, *needle)
            budget = length - len(needle_text) - 1
        else:
            budget = length
        sentences, records, used = [], [], 0
        person = 0
        while True:
            if rng.random() < record_share:
                # A few facts per person, so questions must pick the right relation too.
                if person == 0 or rng.random() < 0.5:
                    person += 1
                name = people[person % len(people)]
                relation = rng.choice(self.relations)
                if (relation, name) in taken:
                    continue
                value = self.value(rng, relation)
                s, rec = self.fact(rng, relation, name, value), (relation, name, value)
            else:
                s, rec = self.filler(rng), None
            extra = len(s) + (1 if sentences else 0)
            if used + extra > budget:
                break
            taken.add(rec[:2]) if rec else None
            sentences.append((s, rec))
            used += extra
        if needle is not None:
            at = min(len(sentences), round(depth * len(sentences)))
            sentences.insert(at, (needle_text, needle))
        text, out = "", []
        for s, rec in sentences:
            if text:
                text += " "
            if rec:
                out.append(rec + (len(text),))
            text += s
        return text, out

    def question(self, relation, name):
        q = self.t["relations"][relation]["question"].format(name=name)
        return self.t["question_format"].format(question=q)

    def answer(self, value):
        return self.t["answer_format"].format(answer=value)

    def training_example(self, rng, length, questions):
        """Token ids and a 0/1 mask of the answer tokens (the span the model must retrieve)."""
        text, records = self.document(rng, length)
        ids, answer_mask = [BOS] + encode(text), [0] * (1 + len(text.encode()))
        for relation, name, value, _ in rng.sample(records, min(questions, len(records))):
            q, a = encode(self.question(relation, name)), encode(self.answer(value))
            ids += q + a
            answer_mask += [0] * len(q) + [1] * len(a)
        ids.append(EOS)
        answer_mask.append(0)
        return ids, answer_mask

    def batch(self, seed, step, batch_size, min_len, max_len, questions):
        """A batch whose documents share one drawn length (less padding); (ids, answer_mask)
        lists padded with PAD / 0 to the longest."""
        rng = random.Random(f"{seed}/{step}")
        length = rng.randint(min_len, max_len)
        rows = [self.training_example(rng, length, rng.randint(1, questions))
                for _ in range(batch_size)]
        width = max(len(ids) for ids, _ in rows)
        ids = [r[0] + [PAD] * (width - len(r[0])) for r in rows]
        mask = [r[1] + [0] * (width - len(r[1])) for r in rows]
        return ids, mask
