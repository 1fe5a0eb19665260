"""Hand-written responses for the differential tests of the ``ifeval`` verifier against IFEval's checkers:
(IFEval instruction id, its kwargs, a response). Written for this project: everyday answers a model gives,
the markdown it uses, and the edge cases Google's ``instructions_test.py`` asserts on (with our own texts).
The expected verdict is not stored: each case is run through both checkers (tests/verifiers/test_ifeval_peer.py).
"""

EN_LONG = ("The river runs through the old town and past the mill. Children play on its banks every summer, "
           "and the fishermen wait there at dawn for the first light.")

LANGUAGE_SAMPLES = {
    "en": "The weather was lovely yesterday, so we walked along the river and had lunch in a small cafe.",
    "es": "Ayer hizo muy buen tiempo, así que caminamos junto al río y comimos en un pequeño café del centro.",
    "pt": "Ontem o tempo estava ótimo, então caminhamos perto do rio e almoçamos num pequeno café da cidade.",
    "ar": "كان الطقس جميلا أمس، لذلك مشينا على طول النهر وتناولنا الغداء في مقهى صغير في وسط المدينة.",
    "hi": "कल मौसम बहुत अच्छा था, इसलिए हम नदी के किनारे टहले और शहर के एक छोटे कैफे में दोपहर का खाना खाया।",
    "fr": "Hier il faisait très beau, alors nous avons marché le long de la rivière et déjeuné dans un petit café.",
    "ru": "Вчера была прекрасная погода, поэтому мы гуляли вдоль реки и обедали в маленьком кафе в центре города.",
    "de": "Gestern war das Wetter herrlich, also sind wir am Fluss entlang spaziert und haben in einem Café gegessen.",
    "ja": "昨日はとても良い天気だったので、私たちは川沿いを散歩して、町の小さなカフェで昼ご飯を食べました。",
    "it": "Ieri il tempo era bellissimo, così abbiamo passeggiato lungo il fiume e pranzato in un piccolo bar.",
    "bn": "গতকাল আবহাওয়া খুব সুন্দর ছিল, তাই আমরা নদীর ধারে হাঁটলাম এবং শহরের একটি ছোট ক্যাফেতে দুপুরের খাবার খেলাম।",
    "uk": "Учора була чудова погода, тому ми гуляли вздовж річки й обідали в маленькій кав'ярні в центрі міста.",
    "th": "เมื่อวานอากาศดีมาก เราจึงเดินเล่นริมแม่น้ำและกินอาหารกลางวันที่ร้านกาแฟเล็กๆ ในเมือง",
    "ur": "کل موسم بہت اچھا تھا، اس لیے ہم دریا کے کنارے چلے اور شہر کے ایک چھوٹے کیفے میں دوپہر کا کھانا کھایا۔",
    "ta": "நேற்று வானிலை மிகவும் நன்றாக இருந்தது, எனவே நாங்கள் ஆற்றங்கரையில் "
          "நடந்து ஒரு சிறிய கஃபேயில் மதிய உணவு சாப்பிட்டோம்.",
    "te": "నిన్న వాతావరణం చాలా బాగుంది, అందుకే మేము నది ఒడ్డున నడిచి ఒక చిన్న కేఫ్‌లో మధ్యాహ్న భోజనం చేశాము.",
    "bg": "Вчера времето беше прекрасно, затова се разходихме покрай реката и обядвахме в малко кафене в града.",
    "ko": "어제는 날씨가 정말 좋아서 우리는 강을 따라 산책하고 시내의 작은 카페에서 점심을 먹었습니다.",
    "pl": "Wczoraj pogoda była piękna, więc spacerowaliśmy wzdłuż rzeki i zjedliśmy obiad w małej kawiarni.",
    "he": "אתמול מזג האוויר היה נפלא, אז טיילנו לאורך הנהר ואכלנו ארוחת צהריים בבית קפה קטן במרכז העיר.",
    "fa": "دیروز هوا خیلی خوب بود، پس در کنار رودخانه قدم زدیم و در یک کافه کوچک در مرکز شهر ناهار خوردیم.",
    "vi": "Hôm qua thời tiết rất đẹp, nên chúng tôi đi dạo dọc bờ sông và ăn trưa ở một quán cà phê nhỏ.",
    "ne": "हिजो मौसम धेरै राम्रो थियो, त्यसैले हामी नदीको किनारमा हिँड्यौं र सहरको एउटा सानो क्याफेमा खाना खायौं।",
    "sw": "Jana hali ya hewa ilikuwa nzuri sana, kwa hivyo tulitembea kando ya mto na kula chakula cha mchana mjini.",
    "kn": "ನಿನ್ನೆ ಹವಾಮಾನ ತುಂಬಾ ಚೆನ್ನಾಗಿತ್ತು, ಆದ್ದರಿಂದ ನಾವು ನದಿಯ ದಡದಲ್ಲಿ ನಡೆದು ಒಂದು ಸಣ್ಣ ಕೆಫೆಯಲ್ಲಿ ಊಟ ಮಾಡಿದೆವು.",
    "mr": "काल हवामान खूप छान होते, म्हणून आम्ही नदीकाठी फिरलो आणि शहरातील एका छोट्या कॅफेत जेवण केले.",
    "gu": "ગઈકાલે હવામાન ખૂબ સરસ હતું, તેથી અમે નદી કિનારે ફર્યા અને શહેરના એક નાના કાફેમાં બપોરનું ભોજન લીધું.",
    "pa": "ਕੱਲ੍ਹ ਮੌਸਮ ਬਹੁਤ ਵਧੀਆ ਸੀ, ਇਸ ਲਈ ਅਸੀਂ ਨਦੀ ਦੇ ਕਿਨਾਰੇ ਤੁਰੇ ਅਤੇ ਸ਼ਹਿਰ ਦੇ ਇੱਕ ਛੋਟੇ ਕੈਫੇ ਵਿੱਚ ਦੁਪਹਿਰ ਦਾ ਖਾਣਾ ਖਾਧਾ।",
    "ml": "ഇന്നലെ കാലാവസ്ഥ വളരെ നല്ലതായിരുന്നു, അതിനാൽ ഞങ്ങൾ "
          "നദീതീരത്തുകൂടി നടന്ന് ഒരു ചെറിയ കഫേയിൽ ഉച്ചഭക്ഷണം കഴിച്ചു.",
    "fi": "Eilen sää oli todella kaunis, joten kävelimme joen rantaa pitkin ja söimme lounasta pienessä kahvilassa.",
}

_L = "language:response_language"
CASES = []
# every language detected as itself, and as none of two others
for code, text in LANGUAGE_SAMPLES.items():
    CASES.append((_L, {"language": code}, text))
CASES += [(_L, {"language": other}, LANGUAGE_SAMPLES[code]) for code, other in
          [("fi", "en"), ("uk", "ru"), ("pl", "pt"), ("sw", "pt"), ("bn", "hi"), ("ne", "hi"), ("mr", "hi"),
           ("ur", "ar"), ("fa", "ar"), ("bg", "ru"), ("es", "pt"), ("it", "es"), ("de", "en"), ("ja", "ko")]]
CASES += [
    (_L, {"language": "en"}, "12345 67890"),
    (_L, {"language": "en"}, "OK"),
    (_L, {"language": "fr"}, "Bonjour! Je m'appelle Marie et j'habite à Lyon depuis dix ans avec ma famille."),
    (_L, {"language": "de"}, "Das ist ein Test. Wir schreiben einen kurzen Text auf Deutsch, damit man ihn erkennt."),
    (_L, {"language": "en"}, "# Title\n\n**Bold** words, *italic* words and a [link](http://example.com) in English."),
]

_LOW, _CAP = "change_case:english_lowercase", "change_case:english_capital"
CASES += [
    (_LOW, {}, "all lowercase, every single letter of it, and still english."),
    (_LOW, {}, "All lowercase except the first letter."),
    (_LOW, {}, "tout est en minuscules mais ce texte est en français, pas en anglais."),
    (_LOW, {}, "12345"),
    (_LOW, {}, "p.s. this one ends with a small postscript and it is lowercase."),
    (_LOW, {}, "the u.s. and nasa work together on a mission to the moon."),
    (_CAP, {}, "THIS WHOLE ANSWER IS WRITTEN IN CAPITAL LETTERS, AS ASKED."),
    (_CAP, {}, "THIS ANSWER HAS ONE lowercase WORD."),
    (_CAP, {}, "CE TEXTE EST ENTIÈREMENT EN MAJUSCULES ET EN FRANÇAIS, PAS EN ANGLAIS."),
    (_CAP, {}, "HELLO WORLD"),
    (_CAP, {}, "P.S. THE END."),
]

_CW = "change_case:capital_word_frequency"
CASES += [
    (_CW, {"capital_frequency": 3, "capital_relation": "at least"}, "NASA and ESA met the UN about it."),
    (_CW, {"capital_frequency": 3, "capital_relation": "at least"}, "NASA's budget grew."),
    (_CW, {"capital_frequency": 2, "capital_relation": "at least"}, "The U.S. and the U.K. signed it."),
    (_CW, {"capital_frequency": 2, "capital_relation": "less than"}, "I think I am right."),
    (_CW, {"capital_frequency": 2, "capital_relation": "less than"}, "We ship to the EU."),
    (_CW, {"capital_frequency": 4, "capital_relation": "at least"}, "THIS IS VERY IMPORTANT NEWS."),
    (_CW, {"capital_frequency": 1, "capital_relation": "at least"}, "Nothing is shouted here."),
    (_CW, {"capital_frequency": 2, "capital_relation": "at least"}, "COVID-19 hit in 2020, says the WHO."),
    (_CW, {"capital_frequency": 3, "capital_relation": "less than"}, "THE END IS NEAR"),
    (_CW, {"capital_frequency": 1, "capital_relation": "at least"}, "The A-team won."),
]

_K = "keywords:existence"
CASES += [
    (_K, {"keywords": ["river", "mill"]}, EN_LONG),
    (_K, {"keywords": ["river", "castle"]}, EN_LONG),
    (_K, {"keywords": ["  river "]}, "The river is wide."),
    (_K, {"keywords": ["U.S."]}, "She moved to the U.S. last year."),
    (_K, {"keywords": ["cat"]}, "The category was wrong."),
    (_K, {"keywords": ["Dawn"]}, EN_LONG),
    (_K, {"keywords": ["first light"]}, EN_LONG),
    (_K, {"keywords": ["summer", "winter"]}, "Summer is warm; winter is cold."),
    (_K, {"keywords": ["play"]}, "Children PLAY outside."),
    (_K, {"keywords": ["bank"]}, "They sat on its banks."),
    (_K, {"keywords": ["climate"]}, "We discuss _climate_ change."),
    (_K, {"keywords": ["climate"]}, "We discuss __climate__ change."),
    (_K, {"keywords": ["init"]}, "Edit __init__.py first."),
    (_K, {"keywords": ["snake_case"]}, "Use snake_case names."),
]

_F = "keywords:forbidden_words"
CASES += [
    (_F, {"forbidden_words": ["river"]}, EN_LONG),
    (_F, {"forbidden_words": ["castle", "king"]}, EN_LONG),
    (_F, {"forbidden_words": ["cat"]}, "The category was wrong."),
    (_F, {"forbidden_words": ["cat"]}, "The Cat sat."),
    (_F, {"forbidden_words": ["U.S."]}, "She moved to the U.S. last year."),
    (_F, {"forbidden_words": ["play"]}, "They played all day."),
    (_F, {"forbidden_words": ["new york"]}, "I love New York in spring."),
    (_F, {"forbidden_words": ["summer"]}, "A summer's day."),
    # disguised with a Cyrillic look-alike (Seedbed finds it; the other disguises: test_ifeval_peer.py)
    (_F, {"forbidden_words": ["bad"]}, "This is b\u0430d news."),
    (_F, {"forbidden_words": ["bad"]}, "This is snake_bad_case code."),  # inside an identifier: not the word
    # ... and what the reading through disguises must not catch: another word, the word as written
    (_F, {"forbidden_words": ["bad"]}, "The badge was new."),
    (_F, {"forbidden_words": ["bad"]}, "Not bad at all."),
    (_F, {"forbidden_words": ["нет"]}, "Он сказал нет."),
    (_F, {"forbidden_words": ["нет"]}, "Он сказал да."),
    (_F, {"forbidden_words": ["bad"]}, "A *good* day, **all** good."),
]

_KF = "keywords:frequency"
CASES += [
    (_KF, {"keyword": "dog", "frequency": 2, "relation": "at least"}, "The dog barked at another dog."),
    (_KF, {"keyword": "climate", "frequency": 2, "relation": "at least"}, "_climate_ first, then __climate__ again."),
    (_KF, {"keyword": "climate", "frequency": 2, "relation": "less than"}, "_climate_, climate and __climate__."),
    (_KF, {"keyword": "dog", "frequency": 3, "relation": "at least"}, "The dog barked at another dog."),
    (_KF, {"keyword": "dog", "frequency": 2, "relation": "less than"}, "One dog only."),
    (_KF, {"keyword": "dog", "frequency": 2, "relation": "less than"}, "Dog, dog, DOG!"),
    (_KF, {"keyword": "cat", "frequency": 2, "relation": "at least"}, "A cat and a category."),
    (_KF, {"keyword": "cat", "frequency": 2, "relation": "less than"}, "Cats and cats and a cat."),
    (_KF, {"keyword": "light", "frequency": 1, "relation": "at least"}, EN_LONG),
    (_KF, {"keyword": "summer", "frequency": 1, "relation": "less than"}, EN_LONG),
]

_LF = "keywords:letter_frequency"
CASES += [
    (_LF, {"letter": "z", "let_frequency": 2, "let_relation": "at least"}, "Zig zag."),
    (_LF, {"letter": "z", "let_frequency": 3, "let_relation": "at least"}, "Zig zag."),
    (_LF, {"letter": "e", "let_frequency": 5, "let_relation": "less than"}, "Hello there."),
    (_LF, {"letter": "e", "let_frequency": 3, "let_relation": "less than"}, "Hello there."),
    (_LF, {"letter": "a", "let_frequency": 1, "let_relation": "at least"}, "ÀÁ no plain letter here"),
    (_LF, {"letter": "q", "let_frequency": 1, "let_relation": "less than"}, "Quite quick."),
]

_S = "length_constraints:number_sentences"
CASES += [
    (_S, {"num_sentences": 2, "relation": "at least"}, "First one. Second one!"),
    (_S, {"num_sentences": 3, "relation": "at least"}, "First one. Second one!"),
    (_S, {"num_sentences": 2, "relation": "less than"}, "Dr. Smith arrived at noon."),
    (_S, {"num_sentences": 2, "relation": "less than"}, "We met at 5 p.m. on Friday."),
    (_S, {"num_sentences": 3, "relation": "at least"}, 'He said "hi." She said "bye." They left.'),
    (_S, {"num_sentences": 2, "relation": "less than"}, "Wait... we should go now."),
    (_S, {"num_sentences": 3, "relation": "at least"}, "Is it? Yes! It is."),
    (_S, {"num_sentences": 2, "relation": "less than"}, "The price rose 3.5 percent in the U.S. economy."),
    (_S, {"num_sentences": 2, "relation": "at least"}, "One sentence without a final stop"),
    (_S, {"num_sentences": 2, "relation": "at least"}, "First sentence. Second without a stop"),
    (_S, {"num_sentences": 4, "relation": "less than"}, "* one item\n* two item\n* three item"),
    (_S, {"num_sentences": 3, "relation": "at least"}, "Mr. and Mrs. Brown came. They sat. They ate."),
    (_S, {"num_sentences": 2, "relation": "at least"}, "It works (mostly.) Then it fails."),
    (_S, {"num_sentences": 5, "relation": "less than"}, EN_LONG + " " + EN_LONG),
    (_S, {"num_sentences": 2, "relation": "less than"}, "See e.g. the manual for details."),
    (_S, {"num_sentences": 2, "relation": "at least"}, "I like it.\n\nYou like it."),
    (_S, {"num_sentences": 3, "relation": "at least"}, "Hello! How are you? Fine."),
    (_S, {"num_sentences": 2, "relation": "less than"}, "J. R. R. Tolkien wrote books."),
]

_P = "length_constraints:number_paragraphs"
CASES += [
    (_P, {"num_paragraphs": 2}, "First paragraph.\n***\nSecond paragraph."),
    (_P, {"num_paragraphs": 2}, "First paragraph.\n\nSecond paragraph."),
    (_P, {"num_paragraphs": 3}, "One.\n***\nTwo.\n***\nThree."),
    (_P, {"num_paragraphs": 3}, "One.\n***\n***\nThree."),
    (_P, {"num_paragraphs": 2}, "***\nOne.\n***\nTwo.\n***"),
    (_P, {"num_paragraphs": 1}, "Just one paragraph, no divider."),
    (_P, {"num_paragraphs": 2}, "One.\n\n***\n\nTwo."),
    (_P, {"num_paragraphs": 2}, "One with ***bold italic*** words.\n***\nTwo."),
    (_P, {"num_paragraphs": 4}, "A.\n***\nB.\n***\nC.\n***\nD."),
    (_P, {"num_paragraphs": 3}, "A.\n***\nB."),
]

_W = "length_constraints:number_words"
CASES += [
    (_W, {"num_words": 5, "relation": "at least"}, "one two three four five"),
    (_W, {"num_words": 5, "relation": "at least"}, "one two three four"),
    (_W, {"num_words": 5, "relation": "less than"}, "one two three four"),
    (_W, {"num_words": 10, "relation": "less than"}, EN_LONG),
    (_W, {"num_words": 20, "relation": "at least"}, EN_LONG),
    (_W, {"num_words": 4, "relation": "at least"}, "Don't stop, it's well-known."),
    (_W, {"num_words": 3, "relation": "less than"}, "**Bold** _words_ here"),
    (_W, {"num_words": 3, "relation": "at least"}, "Three plain words"),
]

_NP = "length_constraints:nth_paragraph_first_word"
CASES += [
    (_NP, {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "second"}, "First here.\n\nSecond here."),
    (_NP, {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "second"}, "First here.\n\nThird here."),
    (_NP, {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "second"}, "First here.\n\nSecond here."),
    (_NP, {"num_paragraphs": 2, "nth_paragraph": 1, "first_word": "first"}, '"First," she said.\n\nThen more.'),
    (_NP, {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "summary"}, "Intro.\n\n**Summary**: done."),
    (_NP, {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "summary"}, "Intro.\n\nSummary: done."),
    (_NP, {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "summary"}, "Intro.\n\nSummary. Done."),
    (_NP, {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "second"}, "First.\n\n\n\nSecond."),
    (_NP, {"num_paragraphs": 3, "nth_paragraph": 3, "first_word": "finally"},
     "One.\n\nTwo.\n\nFinally, the end."),
    (_NP, {"num_paragraphs": 1, "nth_paragraph": 1, "first_word": "hello"}, "Hello world."),
    (_NP, {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "it"}, "One.\n\nIt's the end."),
    (_NP, {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "second"}, "First.\n \nSecond."),
]

_PH = "detectable_content:number_placeholders"
CASES += [
    (_PH, {"num_placeholders": 2}, "Dear [name], your order [number] shipped."),
    (_PH, {"num_placeholders": 2}, "Dear [name], your order shipped."),
    (_PH, {"num_placeholders": 1}, "No placeholder at all."),
    (_PH, {"num_placeholders": 1}, "An empty one: []."),
    (_PH, {"num_placeholders": 2}, "See [the docs](http://x.org) and [address]."),
    (_PH, {"num_placeholders": 3}, "[a] [b] [c]"),
    (_PH, {"num_placeholders": 1}, "A [multi\nline] bracket."),
    (_PH, {"num_placeholders": 1}, "Nested [[name]] brackets."),
]

_PS = "detectable_content:postscript"
CASES += [
    (_PS, {"postscript_marker": "P.S."}, "Body text.\n\nP.S. See you soon."),
    (_PS, {"postscript_marker": "P.S."}, "Body text.\n\n_P.S._ See you soon."),
    (_PS, {"postscript_marker": "P.S."}, "Body text.\n\n__P.S.__ See you soon."),
    (_PS, {"postscript_marker": "P.S."}, "Body text.\n\n*P.S.* See you soon."),
    (_PS, {"postscript_marker": "P.S."}, "body text.\n\np.s. see you soon."),
    (_PS, {"postscript_marker": "P.S."}, "Body text.\n\n**P.S.** See you soon."),
    (_PS, {"postscript_marker": "P.S."}, "Body text and that is all. P.S. Bye."),
    (_PS, {"postscript_marker": "P.S."}, "Body text.\n\nP. S. Bye."),
    (_PS, {"postscript_marker": "P.S."}, "Body text with no postscript."),
    (_PS, {"postscript_marker": "P.P.S"}, "Body.\n\nP.S. One.\n\nP.P.S Two."),
    (_PS, {"postscript_marker": "P.P.S"}, "Body.\n\nP.S. Only one."),
    (_PS, {"postscript_marker": "P.S."}, "Body.\n\nPS: no dots here."),
    (_PS, {"postscript_marker": "P.P.S"}, "Body.\n\np.p.s. lower case."),
]

_B = "detectable_format:number_bullet_lists"
CASES += [
    (_B, {"num_bullets": 2}, "* one\n* two"),
    (_B, {"num_bullets": 2}, "- one\n- two"),
    (_B, {"num_bullets": 3}, "* one\n- two\n* three"),
    (_B, {"num_bullets": 2}, "* one\n**bold** line\n- two"),
    (_B, {"num_bullets": 2}, "Intro:\n* one\n* two\n\nThat is all."),
    (_B, {"num_bullets": 2}, "* one\n---\n* two"),
    (_B, {"num_bullets": 1}, "- one\n-5 degrees outside"),
    (_B, {"num_bullets": 2}, "  * indented one\n  * indented two"),
    (_B, {"num_bullets": 3}, "1. one\n2. two\n3. three"),
    (_B, {"num_bullets": 1}, "*italic start* of a line\n* real bullet"),
]

_CR = "detectable_format:constrained_response"
CASES += [
    (_CR, {}, "My answer is yes."),
    (_CR, {}, "My answer is no."),
    (_CR, {}, "My answer is maybe."),
    (_CR, {}, "My answer is yes, definitely."),
    (_CR, {}, "Yes."),
    (_CR, {}, "my answer is yes."),
    (_CR, {}, "After thinking: My answer is no."),
    (_CR, {}, "My answer is yes. My answer is no."),
]

_H = "detectable_format:number_highlighted_sections"
CASES += [
    (_H, {"num_highlights": 2}, "*one* and *two*"),
    (_H, {"num_highlights": 2}, "**bold** and *one*"),
    (_H, {"num_highlights": 2}, "**bold one** and **bold two**"),
    (_H, {"num_highlights": 1}, "No highlight at all."),
    (_H, {"num_highlights": 1}, "An empty ** pair."),
    (_H, {"num_highlights": 1}, "Compute 2 * 3 * 4 now."),
    (_H, {"num_highlights": 2}, "* bullet with *one* highlight\n* and *two*"),
    (_H, {"num_highlights": 3}, "*a*\n*b*\n*c*"),
    (_H, {"num_highlights": 1}, "*spans\nlines*"),
    (_H, {"num_highlights": 2}, "## *Heading* one\n\nText with **key point**."),
]

_SEC = "detectable_format:multiple_sections"
CASES += [
    (_SEC, {"section_spliter": "SECTION", "num_sections": 2}, "SECTION 1\nfoo\nSECTION 2\nbar"),
    (_SEC, {"section_spliter": "SECTION", "num_sections": 2}, "## SECTION 1\nfoo\n## SECTION 2\nbar"),
    (_SEC, {"section_spliter": "Section", "num_sections": 2}, "**Section 1**\nfoo\n\n**Section 2**\nbar"),
    (_SEC, {"section_spliter": "SECTION", "num_sections": 3}, "SECTION 1\nfoo\nSECTION 2\nbar"),
    (_SEC, {"section_spliter": "Section", "num_sections": 2}, "SECTION 1\nfoo\nSECTION 2\nbar"),
    (_SEC, {"section_spliter": "PARAGRAPH", "num_sections": 2}, "PARAGRAPH 1\nfoo\n\nPARAGRAPH 2\nbar"),
    (_SEC, {"section_spliter": "Day", "num_sections": 2}, "Day 1: walk.\nDay 2: rest."),
    (_SEC, {"section_spliter": "SECTION", "num_sections": 2}, "SECTION 1\nfoo, as SECTION 2 will say."),
    (_SEC, {"section_spliter": "Part", "num_sections": 2}, "Part 1\nx\nPart2\ny"),
    (_SEC, {"section_spliter": "SECTION", "num_sections": 1}, "No sections here."),
]

_J = "detectable_format:json_format"
CASES += [
    (_J, {}, '{"a": 1, "b": [1, 2]}'),
    (_J, {}, '```json\n{"a": 1}\n```'),
    (_J, {}, '```JSON\n{"a": 1}\n```'),
    (_J, {}, '```\n{"a": 1}\n```'),
    (_J, {}, "{'a': 1}"),
    (_J, {}, 'Here it is: {"a": 1}'),
    (_J, {}, '```json\n{"a": 1}'),
    (_J, {}, '[1, 2, 3]'),
    (_J, {}, '```python\n{"a": 1}\n```'),
    (_J, {}, '  \n {"nested": {"x": null}}  \n'),
]

_T = "detectable_format:title"
CASES += [
    (_T, {}, "<<Ode to Joy>>\nText."),
    (_T, {}, "<Ode to Joy>\nText."),
    (_T, {}, "<< >>\nText."),
    (_T, {}, "<<A < B>>\nText."),
    (_T, {}, "Some text first.\n<<Late Title>>"),
    (_T, {}, "<<Broken\ntitle>>"),
    (_T, {}, "<<<Triple>>>"),
    (_T, {}, "No title."),
]

_TR = "combination:two_responses"
CASES += [
    (_TR, {}, "First answer.\n******\nSecond answer."),
    (_TR, {}, "Same.\n******\nSame."),
    (_TR, {}, "Only one answer."),
    (_TR, {}, "One.\n******\nTwo.\n******\nThree."),
    (_TR, {}, "One.\n******\nTwo.\n******"),
    (_TR, {}, "******\nOne.\n******\nTwo."),
    (_TR, {}, "One.\n************\nTwo."),
    (_TR, {}, "One.\n*******\nTwo."),
]

_RP = "combination:repeat_prompt"
CASES += [
    (_RP, {"prompt_to_repeat": "Write a haiku about rain."}, "Write a haiku about rain. Drops on the roof..."),
    (_RP, {"prompt_to_repeat": "Write a haiku about rain."}, "write a haiku about rain. drops on the roof..."),
    (_RP, {"prompt_to_repeat": "Write a haiku about rain."}, "Drops on the roof..."),
    (_RP, {"prompt_to_repeat": "Write a haiku about rain."}, "  Write a haiku about rain.\nDrops..."),
    (_RP, {"prompt_to_repeat": "Write a haiku about rain."}, "Write a poem about rain. Drops..."),
    (_RP, {"prompt_to_repeat": "Write a haiku about rain."}, "Write a haiku about rain."),  # the echo alone
]

_E = "startend:end_checker"
CASES += [
    (_E, {"end_phrase": "Any other questions?"}, "Done. Any other questions?"),
    (_E, {"end_phrase": "Any other questions?"}, "Any other questions? Done."),
    (_E, {"end_phrase": "Any other questions?"}, '"Done. Any other questions?"'),
    (_E, {"end_phrase": "Any other questions?"}, "Done. any other questions?"),
    (_E, {"end_phrase": "Any other questions?"}, "Done. Any other questions?\n\n"),
    (_E, {"end_phrase": "Is there anything else I can help with?"}, "Here. Is there anything else I can help with"),
    (_E, {"end_phrase": "Peace."}, "That is all. **Peace.**"),
]

_NC = "punctuation:no_comma"
CASES += [
    (_NC, {}, "No commas at all."),
    (_NC, {}, "One, two."),
    (_NC, {}, "你好，世界"),
    (_NC, {}, "Numbers like 1000000 and dashes — fine."),
]

_Q = "startend:quotation"
CASES += [
    (_Q, {}, '"Quoted reply."'),
    (_Q, {}, 'Quoted "reply".'),
    (_Q, {}, '  "Spaces around."  '),
    (_Q, {}, '"'),
    (_Q, {}, "“Curly quotes.”"),
    (_Q, {}, '"Two"\n\n"parts"'),
]

# blank responses follow nothing
CASES += [(_NC, {}, "   "), (_Q, {}, ""), (_F, {"forbidden_words": ["x"]}, "\n\n")]

# one case at least for each intentional difference (training.verifiers.ifeval.INTENTIONAL_DIFFERENCES)
CASES += [
    (_CW, {"capital_frequency": 3, "capital_relation": "at least"}, "DON'T STOP now."),
    (_W, {"num_words": 6, "relation": "at least"}, "Don't stop, it's well-known."),
    (_PS, {"postscript_marker": "P.S."}, "Read the help.s. file before you start."),
]
